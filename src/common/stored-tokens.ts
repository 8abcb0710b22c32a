import type { Principal } from './principal.js';

/** Provides the StoredTokens the API token guard reads (the tokens room's store: docs/reference.md §12). */
export const STORED_TOKENS = Symbol('STORED_TOKENS');

/**
 * The tokens kept in the database, as this process last read them: the guard asks it about a
 * presented token's digest, so it never waits for the database on a request.
 */
export interface StoredTokens {
  /** Whether any token is stored (expired ones included); unknown until first read counts as yes. */
  readonly any: boolean;
  /**
   * Who the token of this SHA-256 digest is, when it is stored and not past its `expires_at` at
   * `now` (ms); undefined otherwise. Throws ServiceUnavailableError while the store cannot tell
   * (not read from the database lately), so that a revoked token is never taken for a valid one.
   */
  principal(digest: Buffer, now: number): Principal | undefined;
}
