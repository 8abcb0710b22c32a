import { Socket, TcpSocketConnectOpts } from 'node:net';

/**
 * A socket for a database driver's `stream` option that connects to `port` at the address
 * `resolve` answers when the driver opens it, so every connection of a pool is judged by the
 * egress guard against the address actually used (docs/reference.md §12). A refusal destroys the
 * socket with the guard's error, which the driver reports as the connection's failure. The
 * driver's own `connect(port, host)` call (pg makes one) is ignored: the name is never dialled.
 */
export function guardedSocket(resolve: () => Promise<string>, port: number): Socket {
  const socket = new Socket();
  const connect: (options: TcpSocketConnectOpts) => Socket = Socket.prototype.connect;
  socket.connect = (() => socket) as typeof socket.connect;
  resolve().then(
    (address) => {
      if (!socket.destroyed) connect.call(socket, { port, host: address });
    },
    (error: Error) => socket.destroy(error),
  );
  return socket;
}
