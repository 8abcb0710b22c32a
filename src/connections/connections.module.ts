import { Module } from '@nestjs/common';
import { SecretCipherModule } from '../common/secret-cipher.module.js';
import { ConnectionRepository } from './connection.repository.js';

/** Connections and their sealed tokens: read by the upstream client, written by the connect flow (oauth/). */
@Module({
  imports: [SecretCipherModule],
  providers: [ConnectionRepository],
  exports: [ConnectionRepository],
})
export class ConnectionsModule {}
