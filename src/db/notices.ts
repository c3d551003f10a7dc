import pg from "pg";

export interface NoticeConnectionOptions {
  url: string;
  connectTimeoutMs?: number;
  applicationName?: string;
  /** How long to wait before opening the connection again after it dropped. */
  reconnectMs?: number;
}

type Listener = () => void;

/**
 * PostgreSQL notices (LISTEN) for a whole process on ONE connection outside the pool, whatever the
 * number of channels (jobs, webhooks, mail, schema): each channel is LISTENed when its first
 * listener comes and UNLISTENed when its last one goes; the connection is opened with the first
 * channel and closed with the last.
 *
 * When the connection drops, every listener is called at once (whatever was notified while it was
 * down is found by looking now), and the connection is opened again after `reconnectMs`, LISTENing
 * to every channel that still has listeners.
 */
export class NoticeConnection {
  private readonly listeners = new Map<string, Set<Listener>>();
  private client: pg.Client | undefined;
  /** The connection being opened, which every caller of listen() waits for. */
  private opening: Promise<pg.Client> | undefined;
  private retry: NodeJS.Timeout | undefined;

  private readonly options: NoticeConnectionOptions;

  constructor(options: NoticeConnectionOptions) {
    this.options = options;
  }

  /** Calls `onNotice` on each notice of `channel`; the function returned stops it. */
  async listen(channel: string, onNotice: Listener): Promise<() => Promise<void>> {
    if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`bad channel name ${channel}`);
    let set = this.listeners.get(channel);
    const first = !set;
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
    }
    set.add(onNotice);
    try {
      const client = await this.connection();
      // LISTEN is idempotent: a connection that was opened for this call may have listened already.
      if (first) await client.query(`listen ${channel}`);
    } catch (error) {
      set.delete(onNotice);
      if (set.size === 0 && this.listeners.get(channel) === set) this.listeners.delete(channel);
      throw error;
    }
    return () => this.unlisten(channel, onNotice);
  }

  private async unlisten(channel: string, onNotice: Listener): Promise<void> {
    const set = this.listeners.get(channel);
    if (!set?.delete(onNotice) || set.size > 0) return;
    this.listeners.delete(channel);
    if (this.listeners.size === 0) return this.close();
    await this.client?.query(`unlisten ${channel}`).catch(() => {});
  }

  /** Closes the connection (the listeners stay registered but hear nothing more). */
  async close(): Promise<void> {
    if (this.retry) clearTimeout(this.retry);
    this.retry = undefined;
    const client = this.client ?? (await this.opening?.catch(() => undefined));
    this.client = undefined;
    this.opening = undefined;
    await client?.end().catch(() => {});
  }

  private connection(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.opening ??= this.open().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async open(): Promise<pg.Client> {
    const c = new pg.Client({
      connectionString: this.options.url,
      connectionTimeoutMillis: this.options.connectTimeoutMs ?? 5000,
      application_name: `${this.options.applicationName ?? "backline"}-listen`,
    });
    c.on("error", () => this.dropped(c));
    c.on("end", () => this.dropped(c));
    c.on("notification", (n) => {
      for (const listener of this.listeners.get(n.channel) ?? []) listener();
    });
    try {
      await c.connect();
      for (const channel of this.listeners.keys()) await c.query(`listen ${channel}`);
    } catch (error) {
      c.removeAllListeners("end");
      c.removeAllListeners("error");
      c.on("error", () => {});
      await c.end().catch(() => {});
      throw error;
    }
    this.client = c;
    return c;
  }

  private dropped(c: pg.Client): void {
    if (this.client !== c) return;
    this.client = undefined;
    c.end().catch(() => {});
    this.scheduleReconnect();
    for (const set of this.listeners.values()) for (const listener of set) listener();
  }

  private scheduleReconnect(): void {
    if (this.retry || this.listeners.size === 0) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (this.listeners.size === 0 || this.client) return;
      this.connection().catch(() => this.scheduleReconnect());
    }, this.options.reconnectMs ?? 1000);
    this.retry.unref();
  }
}
