/**
 * Private signing keys encrypted at rest, under a secret the operator supplies
 * (`ARCLIGHT_SIGNING_KEY_SECRET`, or a file named by `ARCLIGHT_SIGNING_KEY_SECRET_FILE` /
 * `arclight coordinator --signing-key-secret-file`).
 *
 * The stored form is `v1:<iv>:<ciphertext>:<tag>` (base64url): AES-256-GCM with a fresh 96-bit IV
 * per row, the row's `kid` as additional data (a ciphertext copied onto another row does not
 * decrypt), and a 256-bit key derived from the secret by scrypt (N = 2^15, r = 8, p = 1 — the secret
 * may be a passphrase rather than random bytes). A wrong secret fails GCM's tag check, so it is
 * told from a right one without storing anything about the secret.
 */

import { createCipheriv, createDecipheriv, randomBytes, scrypt } from 'node:crypto';
import { readFileSync } from 'node:fs';

export const SIGNING_KEY_SECRET_ENV = 'ARCLIGHT_SIGNING_KEY_SECRET';
export const SIGNING_KEY_SECRET_FILE_ENV = 'ARCLIGHT_SIGNING_KEY_SECRET_FILE';
/** Shortest secret accepted, in characters: `openssl rand -base64 32` gives 44. */
export const MIN_SIGNING_KEY_SECRET_LENGTH = 16;

const FORMAT = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Fixed: the key must be derivable from the secret alone, by every replica. */
const SCRYPT_SALT = 'arclight coordinator signing keys v1';
const SCRYPT_OPTIONS = { N: 2 ** 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 };

/** A secret as found, and where, to name it in messages. */
export interface SigningKeySecret {
  readonly value: string;
  /** `ARCLIGHT_SIGNING_KEY_SECRET`, `the file /run/secrets/…`, or `signingKeySecret`. */
  readonly source: string;
}

/** The secret is missing, malformed, or not the one the keys were encrypted with: the coordinator must not start. */
export class SigningKeySecretError extends Error {
  override readonly name = 'SigningKeySecretError';
}

/** A secret file's contents: trailing whitespace (the newline editors and `echo` add) is not part of it. */
export function readSigningKeySecretFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new SigningKeySecretError(`cannot read the signing-key secret file ${path}: ${(error as Error).message}`);
  }
  return text.replace(/\s+$/, '');
}

/**
 * The operator's secret: `option` when given (the CLI passes `--signing-key-secret-file`'s
 * contents here), else `$ARCLIGHT_SIGNING_KEY_SECRET`, else the file `$ARCLIGHT_SIGNING_KEY_SECRET_FILE`
 * names; undefined when none is set. Throws SigningKeySecretError for one that is too short.
 */
export function resolveSigningKeySecret(
  option?: SigningKeySecret | string,
  env: NodeJS.ProcessEnv = process.env,
): SigningKeySecret | undefined {
  let secret: SigningKeySecret | undefined;
  if (typeof option === 'string') secret = { value: option, source: 'signingKeySecret' };
  else if (option) secret = option;
  else if (env[SIGNING_KEY_SECRET_ENV]) secret = { value: env[SIGNING_KEY_SECRET_ENV], source: SIGNING_KEY_SECRET_ENV };
  else if (env[SIGNING_KEY_SECRET_FILE_ENV]) {
    const path = env[SIGNING_KEY_SECRET_FILE_ENV];
    secret = { value: readSigningKeySecretFile(path), source: `${SIGNING_KEY_SECRET_FILE_ENV} (${path})` };
  }
  if (secret && secret.value.length < MIN_SIGNING_KEY_SECRET_LENGTH) {
    throw new SigningKeySecretError(
      `the signing-key secret from ${secret.source} is ${secret.value.length === 0 ? 'empty' : 'too short'}: it must be at least ${MIN_SIGNING_KEY_SECRET_LENGTH} characters (e.g. \`openssl rand -base64 32\`)`,
    );
  }
  return secret;
}

/** Whether a stored private key is in the encrypted form (else it is a plain JWK). */
export function isEncryptedPrivateKey(stored: string): boolean {
  return stored.startsWith(`${FORMAT}:`);
}

/** Derived keys by secret: replicas in one process (tests) and admin verbs derive once. */
const derived = new Map<string, Promise<Buffer>>();

function deriveKey(secret: string): Promise<Buffer> {
  let key = derived.get(secret);
  if (!key) {
    key = new Promise<Buffer>((resolve, reject) =>
      scrypt(secret, SCRYPT_SALT, 32, SCRYPT_OPTIONS, (error, bytes) => (error ? reject(error) : resolve(bytes))),
    );
    derived.set(secret, key);
    key.catch(() => derived.delete(secret));
  }
  return key;
}

export class SigningKeyCipher {
  readonly #key: Buffer;
  /** Where the secret came from, for messages. */
  readonly source: string;

  private constructor(key: Buffer, source: string) {
    this.#key = key;
    this.source = source;
  }

  static async create(secret: SigningKeySecret): Promise<SigningKeyCipher> {
    return new SigningKeyCipher(await deriveKey(secret.value), secret.source);
  }

  /** `plaintext` (a private JWK's JSON) in the stored form, bound to `kid`. */
  encrypt(plaintext: string, kid: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(kid, 'utf8'));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [FORMAT, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join(':');
  }

  /** The plaintext of `stored` (the form `encrypt` returns) for `kid`; SigningKeySecretError when this secret does not open it. */
  decrypt(stored: string, kid: string): string {
    const parts = stored.split(':');
    if (parts.length !== 4 || parts[0] !== FORMAT)
      throw new SigningKeySecretError(`signing key ${kid} is not in the ${FORMAT} encrypted form`);
    const [, iv, body, tag] = parts as [string, string, string, string];
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(kid, 'utf8'));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      throw new SigningKeySecretError(
        `the signing-key secret from ${this.source} does not decrypt signing key ${kid}: it is not the secret the keys in this database were encrypted with`,
      );
    }
  }
}

/**
 * The cipher a coordinator on this database uses: from the operator's secret (`option`, else the
 * environment: resolveSigningKeySecret). Required on PostgreSQL — a shared, networked database
 * must not hold private keys in the clear — so its absence there throws SigningKeySecretError;
 * on SQLite none means plain JWKs (local development stays zero-config).
 */
export async function signingKeyCipherFor(postgres: boolean, option?: SigningKeySecret | string): Promise<SigningKeyCipher | undefined> {
  const secret = resolveSigningKeySecret(option);
  if (!secret) {
    if (postgres) {
      throw new SigningKeySecretError(
        `${SIGNING_KEY_SECRET_ENV} is not set: on PostgreSQL the coordinator keeps its private signing keys encrypted under a secret you supply, and does not start without it — set ${SIGNING_KEY_SECRET_ENV} (at least ${MIN_SIGNING_KEY_SECRET_LENGTH} characters, e.g. \`openssl rand -base64 32\`), or ${SIGNING_KEY_SECRET_FILE_ENV} / --signing-key-secret-file to a file holding it`,
      );
    }
    return undefined;
  }
  return SigningKeyCipher.create(secret);
}
