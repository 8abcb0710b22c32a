import { cliActor } from '../audit/audit-actor.js';
import { DynamicModule, Module } from '@nestjs/common';
import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import { AppError } from '../common/app-error.js';
import { createValidationPipe } from '../common/validation.pipe.js';
import { AppConfig } from '../config/app-config.js';
import { ConfigModule } from '../config/config.module.js';
import { DatabaseModule } from '../database/database.module.js';
import { CreateTokenDto } from '../tokens/tokens.dto.js';
import { TokenNotFoundError } from '../tokens/tokens.errors.js';
import { TokenRecordsModule } from '../tokens/tokens.module.js';
import { TokensService } from '../tokens/tokens.service.js';
import { printJson } from './auth-context.js';
import { withDaemonContext } from './daemon-database.js';

/** Stored API tokens on the daemon's database; every running daemon takes a change within seconds. */
@Module({})
class TokenCommandsModule {
  static register(config: AppConfig, databaseUrl: string): DynamicModule {
    return {
      module: TokenCommandsModule,
      imports: [
        ConfigModule.forRoot(config),
        DatabaseModule.forRoot({ url: databaseUrl, poolSize: 2 }),
        TokenRecordsModule,
      ],
    };
  }
}

/** Exit codes: an unknown token → 1; input the API would refuse (4XX other than 404) → 2, bad usage. */
async function runTokenCommand(
  command: string,
  config: AppConfig,
  work: (tokens: TokensService) => Promise<void>,
): Promise<void> {
  try {
    await withDaemonContext(
      config,
      (url) => TokenCommandsModule.register(config, url),
      (app) => work(app.get(TokensService)),
    );
  } catch (error) {
    if (!(error instanceof AppError)) throw error;
    const field = typeof error.extra.field === 'string' ? ` (${error.extra.field})` : '';
    process.stderr.write(`menu-sync tokens ${command}: ${error.detail}${field}\n`);
    process.exitCode = error instanceof TokenNotFoundError || error.status >= 500 ? 1 : 2;
  }
}

const validation = createValidationPipe();
const list = (value: string) =>
  value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');

interface AddFlags {
  name?: string;
  role?: string;
  ownerIds?: string[];
  expiresAt?: string;
}

/** `menu-sync tokens add --name N --role read|admin …`: prints the token with its secret (shown only now). */
@SubCommand({ name: 'add', description: 'Make an API token; its secret (mst_…) is printed once' })
export class TokensAddCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: AddFlags): Promise<void> {
    await runTokenCommand('add', this.config, async (tokens) => {
      const body = { name: flags.name, role: flags.role, owner_ids: flags.ownerIds, expires_at: flags.expiresAt };
      const plain = Object.fromEntries(Object.entries(body).filter(([, value]) => value !== undefined));
      const dto = (await validation.transform(plain, { type: 'body', metatype: CreateTokenDto })) as CreateTokenDto;
      printJson(await tokens.create(dto, cliActor()));
    });
  }

  @Option({ flags: '--name <name>', description: 'who holds it' })
  parseName(value: string): string {
    return value;
  }

  @Option({ flags: '--role <role>', description: 'read (may only read) or admin' })
  parseRole(value: string): string {
    return value;
  }

  @Option({
    flags: '--owner-ids <list>',
    description: 'read tokens: comma-separated owners it sees (default every owner)',
  })
  parseOwnerIds(value: string): string[] {
    return list(value);
  }

  @Option({
    flags: '--expires-at <instant>',
    description: 'ISO 8601 instant after which it is refused (default never)',
  })
  parseExpiresAt(value: string): string {
    return value;
  }
}

@SubCommand({ name: 'list', description: 'List the stored tokens (oldest first), never their secrets' })
export class TokensListCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(): Promise<void> {
    await runTokenCommand('list', this.config, async (tokens) => printJson({ data: await tokens.all() }));
  }
}

@SubCommand({
  name: 'revoke',
  arguments: '<id>',
  description: 'Revoke a stored token (its id, or a prefix naming one token); refused everywhere within 5 s',
})
export class TokensRevokeCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run([id]: string[]): Promise<void> {
    await runTokenCommand('revoke', this.config, async (tokens) => {
      const revoked = await tokens.revokeByPrefix(id, cliActor());
      process.stderr.write(`menu-sync tokens revoke: revoked ${revoked}\n`);
    });
  }
}

@Command({
  name: 'tokens',
  description: 'Manage API tokens kept in the database: add, list, revoke',
  subCommands: [TokensAddCommand, TokensListCommand, TokensRevokeCommand],
})
export class TokensCommand extends CommandRunner {
  async run(): Promise<void> {
    process.stderr.write('menu-sync tokens: give a subcommand: add | list | revoke <id>\n');
    process.exitCode = 2;
  }
}
