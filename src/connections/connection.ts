/** A token set as the token endpoint answers it (spec endpoint 2), refresh token optional on refresh. */
export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  /** `created_at` of the answer (or the time it arrived, when absent). */
  createdAt: Date;
  expiresIn: number;
  scopes?: string[];
  /** The resource owner, when the token answer names it. */
  ownerId?: string;
}

export type ConnectionState = 'active' | 'reauthorization_required';

/** A connected upstream account, tokens opened. Never serialised as is: the API shows `connectionView` (src/oauth/connection-view.ts). */
export interface Connection {
  id: number;
  authUrl: string;
  baseUrl: string;
  scopes: string[];
  state: ConnectionState;
  /** Made with the built-in emulator of the zero-config sandbox. */
  sandbox: boolean;
  accessToken: string;
  refreshToken: string | null;
  tokenCreatedAt: Date;
  expiresIn: number;
  /** Increases with every stored refresh: tells a caller whether the token it used is still current. */
  tokenVersion: number;
  ownerId: string | null;
  lastRefreshAt: Date | null;
  lastError: string | null;
  createdAt: Date;
}

/** When the access token stops working: `created_at + expires_in`. */
export function expiresAt(connection: Pick<Connection, 'tokenCreatedAt' | 'expiresIn'>): Date {
  return new Date(connection.tokenCreatedAt.getTime() + connection.expiresIn * 1000);
}

/** Refresh ahead of expiry by min(5 min, 10 % of the lifetime) (docs/reference.md §6). */
export function refreshDueAt(connection: Pick<Connection, 'tokenCreatedAt' | 'expiresIn'>): Date {
  const marginMs = Math.min(5 * 60_000, connection.expiresIn * 100);
  return new Date(expiresAt(connection).getTime() - marginMs);
}
