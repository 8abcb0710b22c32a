import type { SinkView } from '../sinks/api/sink-view.js';
import { formatTable, shortIds } from './output.js';

/** Where a sink delivers (a table sink's URL comes masked). */
export function sinkTarget(sink: SinkView): string {
  switch (sink.kind) {
    case 'nats':
      return `${sink.stream ?? ''} ${sink.subject_prefix ?? 'menu'}.>`;
    case 'postgres':
      return `${sink.url ?? ''} (schema ${sink.schema ?? ''})`;
    case 'mysql':
      return `${sink.url ?? ''} (tables ${sink.table_prefix ?? ''}…)`;
    default:
      return sink.url ?? '';
  }
}

const clip = (text: string | null, length: number) =>
  text === null ? '' : text.length <= length ? text : `${text.slice(0, length - 1)}…`;

/** `sinks list`: one row a sink, oldest first. */
export function formatSinkTable(sinks: SinkView[]): string {
  if (sinks.length === 0) return 'No sinks.\n';
  const ids = shortIds(sinks.map((sink) => sink.id));
  return formatTable(
    ['ID', 'KIND', 'STATE', 'LAG', 'OWNERS', 'TARGET', 'LAST SUCCESS', 'LAST ERROR'],
    sinks.map((sink) => [
      ids.get(sink.id)!,
      sink.kind,
      sink.state,
      `${sink.lag}${sink.lag_capped ? '+' : ''}`,
      sink.owner_ids === null ? 'all' : sink.owner_ids.join(','),
      sinkTarget(sink),
      sink.last_success_at ?? 'never',
      clip(sink.last_error, 60),
    ]),
  );
}

/** `sinks show`, `add`, `replay`: one sink, a field a line (a new sink's secret among them, shown only then). */
export function formatSink(sink: SinkView & { secret?: string }): string {
  const fields: Array<[string, string]> = [
    ['id', sink.id],
    ['kind', sink.kind],
    ['target', sinkTarget(sink)],
    ['state', sink.state],
    ['types', sink.types.join(',')],
    ['owners', sink.owner_ids === null ? 'all' : sink.owner_ids.join(',')],
    ['batch size', String(sink.batch_size)],
    ['timeout', `${sink.timeout_ms} ms`],
    ['cursor', sink.cursor],
    ['lag', `${sink.lag}${sink.lag_capped ? '+' : ''}`],
    ['attempts', String(sink.attempts)],
    ['last success', sink.last_success_at ?? 'never'],
    ['failing since', sink.failing_since ?? '-'],
    ['next attempt', sink.next_attempt_at ?? '-'],
    ['last error', sink.last_error ?? '-'],
    ['created', sink.created_at],
  ];
  if (sink.secret !== undefined) fields.push(['secret', `${sink.secret}   (shown only now: keep it)`]);
  const width = Math.max(...fields.map(([name]) => name.length));
  return `${fields.map(([name, value]) => `${`${name}:`.padEnd(width + 2)}${value}`).join('\n')}\n`;
}
