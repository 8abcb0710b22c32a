import type { StatusReport } from '../observability/status-report.js';

const ago = (from: Date, to: Date) => {
  const seconds = Math.round((to.getTime() - from.getTime()) / 1000);
  const abs = Math.abs(seconds);
  const text =
    abs < 90
      ? `${abs} s`
      : abs < 5400
        ? `${Math.round(abs / 60)} min`
        : abs < 129600
          ? `${Math.round(abs / 3600)} h`
          : `${Math.round(abs / 86400)} d`;
  return seconds >= 0 ? `${text} ago` : `in ${text}`;
};

/** The status as one screen of text; colour only on a terminal. */
export function formatStatus(report: StatusReport, colour: boolean): string {
  const paint = (code: number) => (text: string) => (colour ? `\u001b[${code}m${text}\u001b[0m` : text);
  const [red, green, yellow, bold, dim] = [paint(31), paint(32), paint(33), paint(1), paint(2)];
  const state = (value: string) =>
    ['active', 'ok', 'registered'].includes(value)
      ? green(value)
      : ['retrying', 'partial', 'skipped', 'disabled'].includes(value)
        ? yellow(value)
        : red(value);
  const at = new Date(report.at);
  const lines: string[] = [bold(`menu-sync status  ${report.at}`), ''];

  lines.push(bold('Connections'));
  if (report.connections.length === 0)
    lines.push(dim('  none: connect an account at /auth/connect or with `menu-sync auth url`'));
  for (const connection of report.connections) {
    const subscription = connection.subscription;
    lines.push(
      `  #${connection.id}  ${connection.retired ? dim('retired (sandbox)') : state(connection.state)}  owner ${connection.owner_id ?? '?'}  ` +
        `token expires ${ago(new Date(connection.token_expires_at), at)}  ${connection.subscriptions} subscription(s)` +
        `${subscription && !connection.retired ? `, newest ${state(subscription.status)}` : ''}`,
    );
    if (connection.last_error && !connection.retired) lines.push(`      ${red(connection.last_error)}`);
  }

  lines.push('', bold('Projections'));
  for (const projection of report.projections) {
    lines.push(
      `  ${projection.name.padEnd(8)} position ${projection.position} / head ${projection.head}  ` +
        `lag ${projection.lag === 0 ? green('0') : yellow(String(projection.lag))}  parked ${projection.parked === 0 ? '0' : red(String(projection.parked))}`,
    );
    if (projection.parked > 0 && projection.last_error) lines.push(`      ${red(projection.last_error)}`);
  }

  lines.push('', bold('Sinks'));
  const sinks = report.sinks;
  if (sinks === null) lines.push(dim('  not available on this database'));
  else if (sinks.total === 0) lines.push(dim('  none'));
  else {
    const counts = Object.entries(sinks.by_state)
      .filter(([, n]) => n > 0)
      .map(([name, n]) => `${n} ${state(name)}`);
    lines.push(
      `  ${sinks.total} in all: ${counts.join(', ')}; ${sinks.attention === 0 ? green('0') : red(String(sinks.attention))} need attention`,
    );
    for (const sink of sinks.needing_attention)
      lines.push(
        `  ${sink.id.slice(0, 8)}  ${sink.kind}  ${state(sink.state)}${sink.last_error ? `  ${red(sink.last_error)}` : ''}`,
      );
  }

  lines.push('', bold('Last reconcile'));
  const run = report.last_reconcile;
  lines.push(
    run
      ? `  #${run.id}  ${state(run.outcome)}  ${run.trigger}, ${ago(new Date(run.started_at), at)}${run.errors.length > 0 ? `  ${red(run.errors[0])}` : ''}`
      : dim('  none yet'),
  );
  const progress = report.reconcile;
  if (progress !== null && progress.stores_done + progress.stores_pending + progress.stores_failing > 0)
    lines.push(
      `  stores: ${progress.stores_done} done, ${progress.stores_pending} pending, ` +
        `${progress.stores_failing === 0 ? '0' : red(String(progress.stores_failing))} failing` +
        `${progress.next_due_at === null ? '' : `; next due ${ago(new Date(progress.next_due_at), at)}`}`,
    );

  // A daemon older than the archive (MENU_SYNC_URL) reports none.
  const archive = report.archive ?? null;
  if (archive !== null)
    lines.push(
      '',
      `${bold('Archive')}  ${
        archive.files === 0
          ? dim('nothing archived')
          : `horizon ${archive.horizon} (as_of from ${archive.as_of_before ?? '?'}), ${archive.files} file(s), ${formatBytes(archive.bytes)}, newest ${archive.newest_file ?? '?'}`
      }${archive.restored > 0 ? `; ${archive.restored} range(s) restored` : ''}`,
    );

  lines.push('', `${bold('Quarantine')}  ${report.quarantined} rejected deliveries kept`, '');
  if (report.ok) lines.push(green('OK: nothing needs attention'));
  else
    lines.push(
      red(bold(`${report.attention.length} thing(s) need attention:`)),
      ...report.attention.map((reason) => `  ${red('✗')} ${reason}`),
    );
  return `${lines.join('\n')}\n`;
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
