import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { ConnectionRepository } from './connection.repository.js';
import { TokenCipher } from './token-cipher.js';

/** Connections and their sealed tokens: shared by the connect flow (auth) and the upstream client. */
@Module({
  providers: [
    { provide: TokenCipher, useFactory: (config: AppConfig) => TokenCipher.create(config), inject: [AppConfig] },
    ConnectionRepository,
  ],
  exports: [TokenCipher, ConnectionRepository],
})
export class ConnectionStoreModule {}
