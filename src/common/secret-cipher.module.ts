import { Module } from '@nestjs/common';
import { AppConfig } from '../config/app-config.js';
import { SecretCipher } from './secret-cipher.js';

/** The one SecretCipher of the process: tokens, webhook keys in raw bodies, and sink secrets are sealed with it. */
@Module({
  providers: [
    { provide: SecretCipher, useFactory: (config: AppConfig) => SecretCipher.create(config), inject: [AppConfig] },
  ],
  exports: [SecretCipher],
})
export class SecretCipherModule {}
