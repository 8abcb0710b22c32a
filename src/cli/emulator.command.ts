import { Inject, Logger } from '@nestjs/common';
import { Command, CommandRunner, Option } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { emulatorOptions, MAX_RETRIES } from '../emulator/emulator-options.js';
import type { EmulatorOptions } from '../emulator/emulator-options.js';
import { PinoNestLogger } from '../observability/logger.js';
import { ROOT_LOGGER } from './cli-context.js';
import type { RootLogger } from './cli-context.js';
import { EmulatorResendCommand, EmulatorTriggerCommand } from './emulator-client.command.js';
import { untilSignalled } from './signals.js';
import { integerOption } from './option-parsers.js';

interface EmulatorFlags {
  port?: number;
  host?: string;
  seed?: number;
  tokenLifetime?: number;
  retryScheduleMs?: number[];
  deliveryTimeoutMs?: number;
  pageSize?: number;
  demoData?: boolean;
}

@Command({
  name: 'emulator',
  description: 'Run the ordering platform emulator: OAuth server, API, control API and webhook delivery',
  subCommands: [EmulatorTriggerCommand, EmulatorResendCommand],
})
export class EmulatorCommand extends CommandRunner {
  private readonly logger = new Logger('Emulator');

  constructor(
    private readonly config: AppConfig,
    @Inject(ROOT_LOGGER) private readonly rootLogger: RootLogger,
  ) {
    super();
  }

  async run(_: string[], flags: EmulatorFlags): Promise<void> {
    let options: EmulatorOptions;
    try {
      options = this.options(flags);
    } catch (error) {
      process.stderr.write(`menu-sync emulator: ${(error as Error).message}\n`);
      process.exitCode = 2;
      return;
    }
    const stop = untilSignalled(this.logger);
    const [{ startEmulator }, { DEMO_USER_ID }, { DEMO_STORE_ID }] = await Promise.all([
      import('../emulator/emulator.factory.js'),
      import('../emulator/oauth/oauth-server.service.js'),
      import('../emulator/state/emulator-state.service.js'),
    ]);
    const emulator = await startEmulator(options, new PinoNestLogger(this.rootLogger.child({ component: 'emulator' })));
    this.logger.log({
      msg: `emulator listening on ${emulator.url}`,
      url: emulator.url,
      client_id: options.clientId,
      demo_user_id: DEMO_USER_ID,
      store_id: DEMO_STORE_ID,
      seed: options.seed,
      try: [`curl ${emulator.url}/_emulator/state`, `menu-sync emulator trigger product.updated --url ${emulator.url}`],
    });
    await stop;
    await emulator.close();
  }

  private options(flags: EmulatorFlags): EmulatorOptions {
    return emulatorOptions({
      host: flags.host ?? '127.0.0.1',
      port: flags.port ?? 4010,
      seed: flags.seed ?? 1,
      tokenLifetimeSeconds: flags.tokenLifetime ?? 21_600,
      deliveryTimeoutMs: flags.deliveryTimeoutMs ?? 10_000,
      pageSize: flags.pageSize ?? 100,
      demoData: flags.demoData ?? true,
      clientId: this.config.OAUTH_CLIENT_ID ?? 'demo-client',
      clientSecret: this.config.OAUTH_CLIENT_SECRET ?? 'demo-secret',
      ...(flags.retryScheduleMs === undefined ? {} : { retryScheduleMs: flags.retryScheduleMs }),
    });
  }

  @Option({ flags: '--port <port>', description: 'port to listen on (default 4010; 0 picks a free one)' })
  parsePort(value: string): number {
    return integerOption(value, '--port', 0, 65_535);
  }

  @Option({ flags: '--host <host>', description: 'address to listen on (default 127.0.0.1)' })
  parseHost(value: string): string {
    return value;
  }

  @Option({ flags: '--seed <n>', description: 'seed of every fault decision (default 1)' })
  parseSeed(value: string): number {
    return integerOption(value, '--seed', 0, 2 ** 31);
  }

  @Option({ flags: '--token-lifetime <seconds>', description: 'expires_in of access tokens (default 21600)' })
  parseTokenLifetime(value: string): number {
    return integerOption(value, '--token-lifetime', 1, 31_536_000);
  }

  @Option({
    flags: '--retry-schedule-ms <list>',
    description: `the ${MAX_RETRIES} delays before retries, comma-separated (default 60000,300000,1800000,7200000,21600000)`,
  })
  parseRetrySchedule(value: string): number[] {
    return value.split(',').map((part) => integerOption(part.trim(), '--retry-schedule-ms', 0, 86_400_000));
  }

  @Option({
    flags: '--delivery-timeout-ms <ms>',
    description: 'an attempt unanswered this long fails with status 0 (default 10000)',
  })
  parseDeliveryTimeout(value: string): number {
    return integerOption(value, '--delivery-timeout-ms', 1, 600_000);
  }

  @Option({ flags: '--page-size <n>', description: 'page size of the API documents (default 100)' })
  parsePageSize(value: string): number {
    return integerOption(value, '--page-size', 1, 500);
  }

  @Option({ flags: '--no-demo-data', description: 'start with the demo store but an empty menu' })
  parseDemoData(): boolean {
    return false;
  }
}
