// The websocket to the simulator: JSON commands out, messages in; reconnects with backoff and
// resumes what it was showing (the last load, then a seek to where the view was, then play if it played).

export class Connection {
  constructor(onMessage, onStatus) {
    this.onMessage = onMessage;
    this.onStatus = onStatus;
    this.ws = null;
    this.backoff = 500;
    this.lastLoad = null;
    this.resume = null; // () => {t_us, playing}: where the view is, asked at reconnect
    this.pending = [];
    this.connect();
  }

  url() {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    return `${proto}//${location.host}/ws`;
  }

  connect() {
    this.onStatus("connecting");
    const ws = new WebSocket(this.url());
    this.ws = ws;
    let reconnecting = false;
    ws.onopen = () => {
      const wasDown = this.hadConnection;
      this.hadConnection = true;
      this.backoff = 500;
      this.onStatus("live");
      if (wasDown && this.lastLoad) {
        const where = this.resume ? this.resume() : null;
        this.raw(this.lastLoad);
        if (where && where.t_us > 0) this.raw({ type: "seek", t_us: where.t_us });
        if (where && where.playing) this.raw({ type: "play" });
      }
      for (const cmd of this.pending.splice(0)) this.raw(cmd);
    };
    ws.onmessage = (ev) => {
      let msg;
      try {
        msg = JSON.parse(ev.data);
      } catch (e) {
        console.warn("unreadable message from server", e);
        return;
      }
      this.onMessage(msg);
    };
    const retry = () => {
      if (reconnecting) return;
      reconnecting = true;
      this.onStatus(`reconnecting in ${(this.backoff / 1000).toFixed(1)} s`);
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 8000);
    };
    ws.onclose = retry;
    ws.onerror = () => {}; // onclose follows and retries
  }

  raw(cmd) {
    this.ws.send(JSON.stringify(cmd));
  }

  send(cmd) {
    if (cmd.type === "load") this.lastLoad = cmd;
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.raw(cmd);
    else if (cmd.type === "load") this.pending = [cmd]; // a newer load replaces anything queued
    else this.pending.push(cmd);
  }
}
