import { CommandRunner, Option, SubCommand } from 'nest-commander';

interface ClientFlags {
  url?: string;
  id?: string;
}

const DEFAULT_URL = 'http://127.0.0.1:4010';

/** Talks to a running emulator's control API; prints the JSON answer, exits 1 on a refusal. */
async function callEmulator(url: string, path: string, body: unknown): Promise<void> {
  let response: Response;
  try {
    response = await fetch(new URL(path, url), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
  } catch (error) {
    process.stderr.write(
      `menu-sync emulator: no emulator answers at ${url} (${(error as Error).message}); start one with \`menu-sync emulator\`\n`,
    );
    process.exitCode = 1;
    return;
  }
  const text = await response.text();
  (response.ok ? process.stdout : process.stderr).write(`${text}\n`);
  if (!response.ok) process.exitCode = 1;
}

abstract class EmulatorClientCommand extends CommandRunner {
  @Option({ flags: '--url <url>', description: `the emulator's address (default ${DEFAULT_URL})` })
  parseUrl(value: string): string {
    return value;
  }
}

@SubCommand({
  name: 'trigger',
  arguments: '<event>',
  description: 'Make a change that produces the named event (e.g. product.updated) and deliver it',
})
export class EmulatorTriggerCommand extends EmulatorClientCommand {
  async run([eventType]: string[], flags: ClientFlags): Promise<void> {
    await callEmulator(flags.url ?? DEFAULT_URL, '/_emulator/trigger', {
      event_type: eventType,
      ...(flags.id === undefined ? {} : { id: flags.id }),
    });
  }

  @Option({
    flags: '--id <id>',
    description: 'the resource to change (default: the first live one; destroy: the last)',
  })
  parseId(value: string): string {
    return value;
  }
}

@SubCommand({
  name: 'resend',
  arguments: '<event_id>',
  description: 'Deliver an event again to every endpoint subscribed to it',
})
export class EmulatorResendCommand extends EmulatorClientCommand {
  async run([eventId]: string[], flags: ClientFlags): Promise<void> {
    await callEmulator(flags.url ?? DEFAULT_URL, '/_emulator/deliveries/resend', { event_id: eventId });
  }
}
