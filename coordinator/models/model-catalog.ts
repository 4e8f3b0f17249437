/**
 * The model catalog: the slugs clients connect with (`modelName`), their per-second rates, and
 * who may see them. Public models are visible to every account; a private one only to accounts
 * granted it. Slugs come from the catalog, never from display names.
 */

import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { CoordinatorDatabase } from '../storage/schema.ts';

export interface CatalogModel {
  readonly id: string;
  readonly name: string;
  readonly rateCreditsPerSecond: number;
  readonly public: boolean;
}

/** A model slug: lower-case letters, digits, `-`, `_`, `.`; 1–64 characters. */
export const MODEL_SLUG = /^[a-z0-9][a-z0-9._-]{0,63}$/;

export class ModelCatalog {
  readonly #db: Kysely<CoordinatorDatabase>;

  constructor(db: Kysely<CoordinatorDatabase>) {
    this.#db = db;
  }

  async add(name: string, rateCreditsPerSecond: number, options: { public?: boolean } = {}, now = Date.now()): Promise<CatalogModel> {
    if (!MODEL_SLUG.test(name)) throw new Error(`invalid model slug ${JSON.stringify(name)}`);
    const model: CatalogModel = { id: randomUUID(), name, rateCreditsPerSecond, public: options.public ?? true };
    await this.#db
      .insertInto('models')
      .values({ id: model.id, name, rate_credits_per_second: rateCreditsPerSecond, public: model.public ? 1 : 0, created_at: now })
      .execute();
    return model;
  }

  async grant(accountId: string, modelId: string): Promise<void> {
    await this.#db
      .insertInto('model_grants')
      .values({ account_id: accountId, model_id: modelId })
      .onConflict((oc) => oc.doNothing())
      .execute();
  }

  async byName(name: string): Promise<CatalogModel | undefined> {
    const r = await this.#db.selectFrom('models').selectAll().where('name', '=', name).executeTakeFirst();
    return r ? { id: r.id, name: r.name, rateCreditsPerSecond: r.rate_credits_per_second, public: r.public === 1 } : undefined;
  }

  async byId(id: string): Promise<CatalogModel | undefined> {
    const r = await this.#db.selectFrom('models').selectAll().where('id', '=', id).executeTakeFirst();
    return r ? { id: r.id, name: r.name, rateCreditsPerSecond: r.rate_credits_per_second, public: r.public === 1 } : undefined;
  }

  /** The public catalog, by name. */
  async listPublic(): Promise<CatalogModel[]> {
    const rows = await this.#db.selectFrom('models').selectAll().where('public', '=', 1).orderBy('name').execute();
    return rows.map((r) => ({ id: r.id, name: r.name, rateCreditsPerSecond: r.rate_credits_per_second, public: true }));
  }

  /** Every model `accountId` may use: the public catalog and its granted private models. */
  async listVisible(accountId: string): Promise<CatalogModel[]> {
    const rows = await this.#db
      .selectFrom('models')
      .leftJoin('model_grants', (join) =>
        join.onRef('model_grants.model_id', '=', 'models.id').on('model_grants.account_id', '=', accountId),
      )
      .select(['models.id', 'models.name', 'models.rate_credits_per_second', 'models.public', 'model_grants.account_id as granted'])
      .where((eb) => eb.or([eb('models.public', '=', 1), eb('model_grants.account_id', 'is not', null)]))
      .orderBy('models.name')
      .execute();
    return rows.map((r) => ({ id: r.id, name: r.name, rateCreditsPerSecond: r.rate_credits_per_second, public: r.public === 1 }));
  }

  /** Of `names`, the models `accountId` may use (public, or granted to it), keyed by name. */
  async visibleTo(accountId: string, names: readonly string[]): Promise<Map<string, CatalogModel>> {
    if (names.length === 0) return new Map();
    const rows = await this.#db
      .selectFrom('models')
      .leftJoin('model_grants', (join) =>
        join.onRef('model_grants.model_id', '=', 'models.id').on('model_grants.account_id', '=', accountId),
      )
      .select(['models.id', 'models.name', 'models.rate_credits_per_second', 'models.public', 'model_grants.account_id as granted'])
      .where('models.name', 'in', [...names])
      .execute();
    const visible = new Map<string, CatalogModel>();
    for (const r of rows) {
      if (r.public === 1 || r.granted !== null) {
        visible.set(r.name, { id: r.id, name: r.name, rateCreditsPerSecond: r.rate_credits_per_second, public: r.public === 1 });
      }
    }
    return visible;
  }
}
