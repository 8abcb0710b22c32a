// Types of fake-platform.js, for the TypeScript tests that use it.

export interface PlatformRequest {
  user: string | undefined;
  storeId: string;
  resource: string;
  arrivedAt: number;
  /** 0 while unanswered. */
  answeredAt: number;
  status: number;
}

export type Fault = undefined | 'hang' | { status: number; headers?: Record<string, string>; body?: unknown };

export interface FakePlatform {
  url: string;
  requests: PlatformRequest[];
  inFlight: number;
  maxInFlight: number;
  /** How long each answer takes; may be changed while the platform runs. */
  latencyMs: number;
  /** The most requests of one store (of one user) in flight at once. */
  maxInFlightPerStore: number;
  callbacks: Map<string, string>;
  fault: (request: PlatformRequest) => Fault;
  rename(productId: string, title: string): void;
  tokenFor(user: string): string;
  close(): Promise<void>;
}

export function startFakePlatform(options: {
  users: Array<{ id: string; stores: string[] }>;
  latencyMs?: number;
  productsPerStore?: number;
  fault?: (request: PlatformRequest) => Fault;
}): Promise<FakePlatform>;

export function storeMenu(
  storeId: string,
  options?: { productsPerStore?: number; titles?: Map<string, string> },
): Record<'collections' | 'products' | 'traits' | 'trait_options' | 'orders', unknown[]>;

export function mostInWindow(arrivals: number[], windowMs?: number): number;

export const DOCUMENTS_PER_STORE: number;
