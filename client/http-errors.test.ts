import { describe, expect, it } from 'vitest';
import { isErrorCode } from '../protocol/errors.ts';
import { errorFromResponse } from './http-errors.ts';

describe('errorFromResponse', () => {
  it('keeps the code, message and field of an Arclight error body', async () => {
    const error = await errorFromResponse(
      new Response(JSON.stringify({ code: 'too_many_sessions', message: 'full', field: '/model' }), { status: 429 }),
    );
    expect(error).toMatchObject({ code: 'too_many_sessions', message: 'full', field: '/model', status: 429, retryable: true });
  });

  it.each([401, 402, 403, 404, 409, 410, 426, 429, 501, 500, 503, 400, 418])(
    'gives a body with no code (HTTP %i, e.g. from a proxy) a code from the taxonomy',
    async (status) => {
      const error = await errorFromResponse(new Response('<html>gateway</html>', { status }));
      expect(error.status).toBe(status);
      expect(isErrorCode(error.code), error.code).toBe(true);
    },
  );

  it('reads a bare 429 as rate_limited, retryable, with its Retry-After', async () => {
    const error = await errorFromResponse(new Response('slow down', { status: 429, headers: { 'retry-after': '7' } }));
    expect(error).toMatchObject({ code: 'rate_limited', retryable: true, retryAfterSeconds: 7 });
  });
});
