import { AuditModule } from '../audit/audit.module.js';
import { Global, Module } from '@nestjs/common';
import { STORED_TOKENS } from '../common/stored-tokens.js';
import { ApiTokenRepository } from './api-token.repository.js';
import { TokenStore } from './token-store.js';
import { TokensController } from './tokens.controller.js';
import { TokensService } from './tokens.service.js';

/** Stored tokens managed without the API (the CLI): no store, no controller. */
@Module({ imports: [AuditModule], providers: [ApiTokenRepository, TokensService], exports: [TokensService] })
export class TokenRecordsModule {}

/**
 * Stored API tokens (docs/reference.md §12): `/api/v1/tokens`, and the store every ApiTokenGuard
 * reads, global so that a guard in any module finds the one instance.
 */
@Global()
@Module({
  imports: [AuditModule],
  controllers: [TokensController],
  providers: [ApiTokenRepository, TokensService, TokenStore, { provide: STORED_TOKENS, useExisting: TokenStore }],
  exports: [STORED_TOKENS],
})
export class TokensModule {}
