/**
 * Polling for end-to-end tests whose conditions live in a page or a process: `pollUntil` retries a
 * probe (a throw counts as "not yet") until it returns a truthy value, and on timeout fails with
 * the last value and whatever `diagnostics` adds (a page's console, its status text).
 */
export async function pollUntil<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  options: { timeoutMs?: number; intervalMs?: number; diagnostics?: () => string | Promise<string> } = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      last = await probe();
      if (last) return last as T;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      const detail = options.diagnostics ? await options.diagnostics() : '';
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}; last value: ${last instanceof Error ? last.message : JSON.stringify(last)}${detail}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs ?? 150));
  }
}
