// A refusal, however a service gives it: thrown (ApiError) or answered (a policy Refusal value).
import { ApiError, ERROR_STATUS } from '../../src/lib/errors.js';
import { isRefusal } from '../../src/lib/refusal.js';

export type SeenRefusal = Pick<ApiError, 'code' | 'message' | 'details' | 'status'>;

export async function refusal(promise: Promise<unknown>): Promise<SeenRefusal> {
  let value: unknown;
  try {
    value = await promise;
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  if (isRefusal(value)) return { ...value.refusal, status: ERROR_STATUS[value.refusal.code] };
  throw new Error('expected a refusal');
}
