/** A JWT given as a string or as a resolver called again before every request that needs one. */
export type TokenSource = string | (() => string | Promise<string>);

export async function resolveToken(source: TokenSource | undefined): Promise<string | undefined> {
  if (source === undefined) return undefined;
  return typeof source === 'string' ? source : await source();
}
