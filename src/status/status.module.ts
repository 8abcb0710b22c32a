import { Module } from '@nestjs/common';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { StatusController } from './status.controller.js';
import { StatusService } from './status.service.js';

/** `GET /api/v1/status`, the report the console counts and colours from. */
@Module({ controllers: [StatusController], providers: [StatusService, ApiTokenGuard] })
export class StatusModule {}
