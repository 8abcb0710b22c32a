import { Body, Controller, Delete, Get, HttpCode, Param, Patch, Post } from '@nestjs/common';
import type { ResourceObject } from '../platform-event.js';
import { controlError } from '../emulator-http.error.js';
import { EmulatorState } from '../state/emulator-state.service.js';
import type { StateDocument } from '../state/emulator-state.service.js';
import { MENU_PATHS } from '../state/resource-schemas.js';
import type { MenuType } from '../state/resource-schemas.js';
import { TriggerService } from './trigger.service.js';

type JsonBody = Record<string, unknown>;

/** The control API of docs/reference.md §9: change the platform's state; each change is delivered as webhook events. */
@Controller('_emulator')
export class ControlController {
  constructor(
    private readonly state: EmulatorState,
    private readonly triggers: TriggerService,
  ) {}

  @Get('state')
  snapshot(): StateDocument {
    return this.state.state();
  }

  @Post('trigger')
  @HttpCode(201)
  trigger(@Body() body: unknown) {
    return this.triggers.trigger(jsonObject(body).event_type, jsonObject(body).id);
  }

  @Post('stores')
  @HttpCode(201)
  createStore(@Body() body: unknown): { id: string } {
    return { id: this.state.createStore(jsonObject(body)) };
  }

  @Patch('stores/:id')
  updateStore(@Param('id') id: string, @Body() body: unknown): ResourceObject {
    return this.state.updateStore(id, jsonObject(body));
  }

  @Delete('stores/:id')
  @HttpCode(204)
  destroyStore(@Param('id') id: string): void {
    this.state.destroyStore(id);
  }

  @Post('orders')
  @HttpCode(201)
  placeOrder(@Body() body: unknown): { id: string } {
    return { id: this.state.placeOrder(jsonObject(body)) };
  }

  @Patch('orders/:id')
  updateOrder(@Param('id') id: string, @Body() body: unknown): ResourceObject {
    return this.state.updateOrder(id, jsonObject(body));
  }

  @Post(':resources')
  @HttpCode(201)
  create(@Param('resources') resources: string, @Body() body: unknown): { id: string } {
    return { id: this.state.createMenu(menuType(resources), jsonObject(body)) };
  }

  @Patch(':resources/:id')
  update(@Param('resources') resources: string, @Param('id') id: string, @Body() body: unknown): ResourceObject {
    return this.state.updateMenu(menuType(resources), id, jsonObject(body));
  }

  @Delete(':resources/:id')
  @HttpCode(204)
  destroy(@Param('resources') resources: string, @Param('id') id: string): void {
    this.state.destroyMenu(menuType(resources), id);
  }
}

function menuType(path: string): MenuType {
  const type = MENU_PATHS[path];
  if (type === undefined)
    throw controlError(404, `no control path /_emulator/${path}; menu types are ${Object.keys(MENU_PATHS).join(', ')}`);
  return type;
}

function jsonObject(body: unknown): JsonBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw controlError(400, 'the body must be a JSON object');
  return body as JsonBody;
}
