import type { ChangeEntry, ChangeFilter, ChangePage, ChangeText } from '../../changes/change.js';
import { AS_ENTRY, AS_TEXT, ChangeLogRepository } from '../../changes/change-log.repository.js';
import type { Sink } from '../sink.js';
import { inSnapshot, SinkSnapshots } from '../sink-start.js';
import { isTableKind } from '../tables/table-target.js';

/** What a sink's pages hold: changes as objects for a table sink, as the JSON texts it sends for the others. */
export type SinkChange = ChangeEntry | ChangeText;

/** A table sink takes changes as objects: the shared read's texts parsed (the text is the change's JSON). */
export const asEntry = (text: ChangeText): ChangeEntry => ({
  change: JSON.parse(text.json) as ChangeEntry['change'],
  position: text.position,
});

export const seqOf = (change: SinkChange) => ('change' in change ? change.change.seq : change.seq);

/** A page read ahead, and what it was read for: it serves a round whose sink reads the same. */
export interface ReadAhead {
  key: string;
  page: Promise<ChangePage<SinkChange> | null>;
}

/** What a page is read for (ReadAhead's key). */
export const readKey = (sink: Sink) =>
  JSON.stringify([sink.cursor, sink.epoch, sink.batchSize, sink.types, sink.ownerIds]);

/**
 * The page after the sink's cursor, of the changes it follows (of its snapshot first, if any);
 * `horizon`: the readers' horizon of the page before, when this one is read ahead.
 */
export function readSinkPage(
  source: { changeLog: ChangeLogRepository; snapshots: SinkSnapshots; defaultTypes: readonly string[] },
  sink: Sink,
  horizon?: string,
): Promise<ChangePage<SinkChange>> {
  const types = sink.types ?? source.defaultTypes;
  const table = isTableKind(sink.kind);
  if (inSnapshot(sink)) {
    const snapshots = source.snapshots;
    return table ? snapshots.readAfter(sink, types, AS_ENTRY) : snapshots.readAfter(sink, types, AS_TEXT);
  }
  const filter: ChangeFilter = {
    limit: sink.batchSize,
    types,
    ...(sink.ownerIds === null ? {} : { ownerIds: sink.ownerIds }),
    ...(horizon === undefined ? {} : { horizon }),
  };
  const changeLog = source.changeLog;
  return table ? changeLog.readAfter(sink.cursor, filter) : changeLog.readTextsAfter(sink.cursor, filter);
}
