/**
 * An event's version (docs/reference.md §4): `(occurred_at, attributes.id, data.id)` compared in that
 * order — occurred_at as an instant, attributes.id as an integer (absent sorts first), data.id
 * bytewise. The newest version of a resource decides its state, whatever the arrival order.
 */
export interface Version {
  occurredAt: Date;
  seq: bigint | null;
  eventId: string;
}

export function compareVersions(a: Version, b: Version): number {
  const time = a.occurredAt.getTime() - b.occurredAt.getTime();
  if (time !== 0) return Math.sign(time);
  if (a.seq !== b.seq) {
    if (a.seq === null) return -1;
    if (b.seq === null) return 1;
    return a.seq < b.seq ? -1 : 1;
  }
  return Buffer.compare(Buffer.from(a.eventId, 'utf8'), Buffer.from(b.eventId, 'utf8'));
}
