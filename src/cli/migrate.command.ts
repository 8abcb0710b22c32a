import { Logger } from '@nestjs/common';
import { Command, CommandRunner } from 'nest-commander';
import { AppConfig } from '../config/app-config.js';

@Command({ name: 'migrate', description: 'Apply pending database migrations and exit' })
export class MigrateCommand extends CommandRunner {
  private readonly logger = new Logger(MigrateCommand.name);

  constructor(private readonly config: AppConfig) {
    super();
  }

  async run(): Promise<void> {
    // Beside a running daemon in embedded mode, attach to its PostgreSQL (as replay and reconcile do).
    const [{ migrateDatabase }, { onDaemonDatabase }] = await Promise.all([
      import('../database/migrate.js'),
      import('./daemon-database.js'),
    ]);
    const applied = await onDaemonDatabase(this.config, (_url, database) => migrateDatabase(database.migrationUrl), {
      migrate: false,
    });
    this.logger.log(applied.length === 0 ? 'no pending migrations' : `applied ${applied.length} migration(s)`);
  }
}
