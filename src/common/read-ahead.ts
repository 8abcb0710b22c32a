/**
 * A read started before it is needed (the next page while this one is written out). Nobody may
 * await it if the reader goes away first, so its failure is marked handled here; whoever awaits
 * it still sees the failure.
 */
export function readAhead<T>(read: Promise<T>): Promise<T> {
  read.catch(() => undefined);
  return read;
}
