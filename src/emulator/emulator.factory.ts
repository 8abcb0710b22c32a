import { LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, NestFastifyApplication } from '@nestjs/platform-fastify';
import { DeliveryService } from './delivery/delivery.service.js';
import { EmulatorErrorFilter } from './emulator-error.filter.js';
import { EmulatorModule } from './emulator.module.js';
import { EmulatorOptions } from './emulator-options.js';

/** A listening emulator: its base URL (both `{auth_url}` and `{base_url}`) and how to stop it. */
export interface RunningEmulator {
  url: string;
  app: NestFastifyApplication;
  close(): Promise<void>;
}

/** Boots the emulator as its own Nest application on its own port (CLI, tests, the zero-config sandbox). */
export async function startEmulator(
  options: EmulatorOptions,
  logger: LoggerService | false = false,
): Promise<RunningEmulator> {
  const app = await NestFactory.create<NestFastifyApplication>(
    EmulatorModule.register(options),
    new FastifyAdapter({ forceCloseConnections: true }),
    { logger },
  );
  app.useGlobalFilters(new EmulatorErrorFilter());
  await app.listen({ host: options.host, port: options.port });
  const address = app.getHttpServer().address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const host = options.host === '0.0.0.0' || options.host === '::' ? '127.0.0.1' : options.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    app,
    close: async () => {
      app.get(DeliveryService).stop();
      await app.close();
    },
  };
}
