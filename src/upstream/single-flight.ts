/** At most one run per key at a time: callers arriving while one is in flight share its outcome. */
export class SingleFlight<K, V> {
  private readonly flights = new Map<K, Promise<V>>();

  run(key: K, fn: () => Promise<V>): Promise<V> {
    const current = this.flights.get(key);
    if (current !== undefined) return current;
    const flight = fn().finally(() => this.flights.delete(key));
    this.flights.set(key, flight);
    return flight;
  }
}
