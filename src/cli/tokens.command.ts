import { cliActor } from '../audit/audit-actor.js';
import type { TokensService } from '../tokens/tokens.service.js';
import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { printJson } from './output.js';

/** Runs `work` with TokensService on the daemon's database (tokens-context.ts, loaded only when a command runs). */
async function runTokenCommand(
  command: string,
  config: AppConfig,
  work: (tokens: TokensService) => Promise<void>,
): Promise<void> {
  const { runTokenCommand: run } = await import('./tokens-context.js');
  await run(command, config, work);
}

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
      const [{ createValidationPipe }, { CreateTokenDto }] = await Promise.all([
        import('../common/validation.pipe.js'),
        import('../tokens/tokens.dto.js'),
      ]);
      const dto = (await createValidationPipe().transform(plain, {
        type: 'body',
        metatype: CreateTokenDto,
      })) as InstanceType<typeof CreateTokenDto>;
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
      process.stdout.write(`revoked ${revoked}\n`);
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
