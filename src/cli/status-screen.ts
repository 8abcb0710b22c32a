import type { StatusSnapshot } from '../observability/status-report.js';

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
export function formatStatus(snapshot: StatusSnapshot, attention: string[], colour: boolean): string {
  const paint = (code: number) => (text: string) => (colour ? `\u001b[${code}m${text}\u001b[0m` : text);
  const [red, green, yellow, bold, dim] = [paint(31), paint(32), paint(33), paint(1), paint(2)];
  const state = (value: string) =>
    ['active', 'ok', 'registered'].includes(value)
      ? green(value)
      : ['retrying', 'partial', 'skipped', 'disabled'].includes(value)
        ? yellow(value)
        : red(value);
  const lines: string[] = [bold(`menu-sync status  ${snapshot.at.toISOString()}`), ''];

  lines.push(bold('Connections'));
  if (snapshot.connections.length === 0)
    lines.push(dim('  none: connect an account at /auth/connect or with `menu-sync auth url`'));
  for (const connection of snapshot.connections) {
    const retired = connection.sandbox && connection.state !== 'active';
    lines.push(
      `  #${connection.id}  ${retired ? dim('retired (sandbox)') : state(connection.state)}  owner ${connection.ownerId ?? '?'}  ` +
        `token expires ${ago(connection.expiresAt, snapshot.at)}  ${connection.subscriptions} subscription(s)` +
        `${connection.failedSubscriptions > 0 ? red(`, ${connection.failedSubscriptions} failed`) : ''}`,
    );
    if (connection.lastError && !retired) lines.push(`      ${red(connection.lastError)}`);
  }

  lines.push('', bold('Projections'));
  for (const projection of snapshot.projections) {
    const later = snapshot.later.find((item) => item.name === projection.name);
    const lag = later?.lag ?? projection.lag;
    lines.push(
      `  ${projection.name.padEnd(8)} position ${later?.position ?? projection.position} / head ${projection.head}  ` +
        `lag ${lag === 0 ? green('0') : yellow(String(lag))}  parked ${projection.parked === 0 ? '0' : red(String(projection.parked))}`,
    );
    if (projection.parked > 0 && projection.lastError) lines.push(`      ${red(projection.lastError)}`);
  }

  lines.push('', bold('Sinks'));
  if (snapshot.sinks === undefined) lines.push(dim('  not available on this database'));
  else if (snapshot.sinks.length === 0) lines.push(dim('  none'));
  for (const sink of snapshot.sinks ?? []) {
    lines.push(
      `  #${sink.id}  ${sink.kind ?? ''}  ${state(sink.state)}${sink.lastError ? `  ${red(sink.lastError)}` : ''}`,
    );
  }

  lines.push('', bold('Last reconcile'));
  const run = snapshot.lastReconcile;
  lines.push(
    run
      ? `  #${run.id}  ${state(run.outcome)}  ${run.trigger}, ${ago(new Date(run.startedAt), snapshot.at)}${run.errors.length > 0 ? `  ${red(run.errors[0])}` : ''}`
      : dim('  none yet'),
  );

  lines.push('', `${bold('Quarantine')}  ${snapshot.quarantined} rejected deliveries kept`, '');
  if (attention.length === 0) lines.push(green('OK: nothing needs attention'));
  else
    lines.push(
      red(bold(`${attention.length} thing(s) need attention:`)),
      ...attention.map((reason) => `  ${red('✗')} ${reason}`),
    );
  return `${lines.join('\n')}\n`;
}
