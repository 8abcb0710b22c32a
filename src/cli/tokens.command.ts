import { cliActor } from '../audit/audit-actor.js';
import type { TokensService } from '../tokens/tokens.service.js';
import { Command, CommandRunner, Option, SubCommand } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';
import { formatTable, printJson, shortIds } from './output.js';

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
  json?: boolean;
}

const JSON_OPTION = { flags: '--json', description: 'print the answer as JSON, as the API gives it' };
const never = (value: string | null) => value ?? 'never';

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
      const token = await tokens.create(dto, cliActor());
      if (flags.json) printJson(token);
      else
        process.stdout.write(
          `id:       ${token.id}\nname:     ${token.name}\nrole:     ${token.role}\nowners:   ${token.owner_ids?.join(',') ?? 'all'}\n` +
            `expires:  ${never(token.expires_at)}\ntoken:    ${token.token}   (shown only now: keep it)\n`,
        );
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

  @Option(JSON_OPTION)
  parseJson(): boolean {
    return true;
  }
}

@SubCommand({ name: 'list', description: 'List the stored tokens (oldest first), never their secrets' })
export class TokensListCommand extends CommandRunner {
  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(_: string[], flags: { json?: boolean }): Promise<void> {
    await runTokenCommand('list', this.config, async (tokens) => {
      const data = await tokens.all();
      if (flags.json) return printJson({ data });
      if (data.length === 0) return void process.stdout.write('No stored tokens.\n');
      const ids = shortIds(data.map((token) => token.id));
      process.stdout.write(
        formatTable(
          ['ID', 'NAME', 'ROLE', 'OWNERS', 'EXPIRES', 'LAST USED', 'CREATED'],
          data.map((token) => [
            ids.get(token.id)!,
            token.name,
            token.role,
            token.owner_ids?.join(',') ?? 'all',
            never(token.expires_at),
            never(token.last_used_at),
            token.created_at,
          ]),
        ),
      );
    });
  }

  @Option(JSON_OPTION)
  parseJson(): boolean {
    return true;
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
