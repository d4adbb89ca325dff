// A WHIP publisher or WHEP viewer on libdatachannel (node-datachannel), the WebRTC stack of OBS Studio's
// WHIP output, set up the way OBS sets it up: sendonly Opus then H.264 tracks, each with an RTP packetizer,
// an RTCP sender-report reporter and a NACK responder; the offer is POSTed once ICE gathering completes.
//
//   node whip_client.cjs '{"mode": "publish", "url": "http://10.77.0.1:8080/whip", "token": "T",
//                          "media": "clip.bin", "audio": true, "seconds": 3}'
//   node whip_client.cjs '{"mode": "view", "url": "http://10.77.0.1:8080/whep/ID", "token": "V",
//                          "out": "rtp.bin", "seconds": 3}'
//
// `media` holds the encoded clip the publisher sends in real time: records of kind (1 byte, V or A),
// timestamp (uint32 BE, RTP clock), length (uint32 BE) and an H.264 access unit (Annex B) or an Opus packet.
// The viewer writes every RTP packet it receives to `out` as records of kind, length and packet.
// Prints one JSON line: what happened, the DTLS error if any, counts.
"use strict";

const fs = require("fs");
const ndc = require("node-datachannel");

const args = JSON.parse(process.argv[2]);
const result = {
  mode: args.mode,
  library: ndc.getLibraryVersion(),
  states: [],
  connected: false,
  status: null,
  errors: [],
  sent: { video: 0, audio: 0 },
  received: { video: 0, video_frames: 0, audio: 0 },
  // ms after the POST went out: answer, connected, first video packet and frame (a viewer); frame_ms: when
  // each of the first video frames' marker packets arrived (a viewer), to time the first one that decodes
  timeline_ms: {},
  frame_ms: [],
};
let postedAt = null;
const since = () => (postedAt === null ? null : Math.round((performance.now() - postedAt) * 10) / 10);
const logLines = [];
ndc.initLogger(args.logLevel || "Warning", (level, message) => {
  logLines.push(`${since()} ${level} ${message}`);
  if (/^(Error|Fatal)$/i.test(level) || /dtls|fingerprint|certificate/i.test(message)) {
    result.errors.push(message);
  }
});

function readClip(path) {
  const data = fs.readFileSync(path);
  const records = [];
  for (let at = 0; at + 9 <= data.length; ) {
    const kind = String.fromCharCode(data[at]);
    const ts = data.readUInt32BE(at + 1);
    const len = data.readUInt32BE(at + 5);
    records.push({ kind, ts, payload: data.subarray(at + 9, at + 9 + len) });
    at += 9 + len;
  }
  return records;
}

function finish(code) {
  result.log_tail = logLines.slice(-40);
  process.stdout.write(JSON.stringify(result) + "\n");
  ndc.cleanup();
  process.exit(code);
}

function sendTrack(pc, media, ssrc, cname, payloadType, clockRate, packetizerOf) {
  media.addSSRC(ssrc, cname, "livefuse-interop", cname);
  const track = pc.addTrack(media);
  const config = new ndc.RtpPacketizationConfig(ssrc, cname, payloadType, clockRate);
  const packetizer = packetizerOf(config);
  packetizer.addToChain(new ndc.RtcpSrReporter(config));
  packetizer.addToChain(new ndc.RtcpNackResponder());
  track.setMediaHandler(packetizer);
  return { track, config };
}

async function exchange(pc) {
  const offer = pc.localDescription().sdp;
  const headers = { "Content-Type": "application/sdp" };
  if (args.token) headers.Authorization = `Bearer ${args.token}`;
  // Node's first fetch loads its HTTP client (tens of ms here, up to 200 with the box busy): an OPTIONS to the
  // same URL first (WHIP and WHEP answer it), so that the POST is timed from when it goes out
  try {
    await fetch(args.url, { method: "OPTIONS", headers: args.token ? { Authorization: headers.Authorization } : {} });
  } catch (err) {
    result.errors.push(`OPTIONS: ${err}`);
  }
  postedAt = performance.now();
  const response = await fetch(args.url, { method: "POST", headers, body: offer });
  result.timeline_ms.answer = since();
  result.status = response.status;
  result.location = response.headers.get("location");
  result.viewer_token = response.headers.get("livefuse-viewer-token");
  const answer = await response.text();
  if (response.status !== 201) {
    result.errors.push(`POST answered ${response.status}: ${answer.slice(0, 200)}`);
    finish(1);
  }
  pc.setRemoteDescription(answer, "answer");
}

function whenGathered(pc, then) {
  let started = false;
  const go = () => {
    if (started) return;
    started = true;
    then().catch((err) => {
      // what the connection does next (its state, the library's log) says why: wait a moment for it
      result.errors.push(String(err));
      setTimeout(() => finish(1), 1500);
    });
  };
  pc.onGatheringStateChange((state) => {
    if (state === "complete") go();
  });
  pc.setLocalDescription();
  if (pc.gatheringState() === "complete") go();
}

function watchState(pc, onConnected) {
  pc.onStateChange((state) => {
    result.states.push(state);
    if (state === "connected" && !result.connected) {
      result.connected = true;
      result.timeline_ms.connected = since();
      onConnected();
    }
    if (state === "failed" || state === "closed") finish(result.connected ? 0 : 1);
  });
}

function publish() {
  const clip = readClip(args.media);
  const video = clip.filter((r) => r.kind === "V");
  const audio = clip.filter((r) => r.kind === "A");
  const pc = new ndc.PeerConnection("whip", { iceServers: [] });
  let audioSide = null;
  if (args.audio) {
    const media = new ndc.Audio("0", "SendOnly");
    media.addOpusCodec(111);
    audioSide = sendTrack(pc, media, 0x1a2b3c4d, "audio", 111, 48000, (c) => new ndc.RtpPacketizer(c));
  }
  const videoMedia = new ndc.Video(args.audio ? "1" : "0", "SendOnly");
  videoMedia.addH264Codec(96);
  const videoSide = sendTrack(pc, videoMedia, 0x5e6f7a8b, "video", 96, 90000,
    (c) => new ndc.H264RtpPacketizer("StartSequence", c));

  watchState(pc, () => {
    const start = Date.now();
    const streams = [
      { records: video, side: videoSide, clock: 90000, step: 6000, kind: "video" },
      { records: audioSide ? audio : [], side: audioSide, clock: 48000, step: 960, kind: "audio" },
    ].map((s) => ({ ...s, next: 0, base: Math.floor(Math.random() * 0x7fffffff),
      span: s.records.length ? s.records[s.records.length - 1].ts - s.records[0].ts + s.step : 0 }));
    const tick = setInterval(() => {
      const elapsed = (Date.now() - start) / 1000;
      if (elapsed >= args.seconds) {
        clearInterval(tick);
        setTimeout(() => {
          pc.close();
          finish(0);
        }, 300);
        return;
      }
      for (const s of streams) {
        // the clip loops; every record goes out when its time has come, stamped on the stream's clock
        while (s.records.length) {
          const record = s.records[s.next % s.records.length];
          const ts = Math.floor(s.next / s.records.length) * s.span + record.ts - s.records[0].ts;
          if (ts / s.clock > elapsed) break;
          if (s.side.track.isOpen()) {
            s.side.config.timestamp = (s.base + ts) >>> 0;
            s.side.track.sendMessageBinary(record.payload);
            result.sent[s.kind] += 1;
          }
          s.next += 1;
        }
      }
    }, 5);
  });
  whenGathered(pc, () => exchange(pc));
}

function view() {
  const out = fs.openSync(args.out, "w");
  const pc = new ndc.PeerConnection("whep", { iceServers: [] });
  const keep = (kind) => (message) => {
    const packet = Buffer.from(message);
    if (packet.length < 12 || packet[1] >= 192 && packet[1] <= 223) return; // RTCP
    const header = Buffer.alloc(5);
    header.write(kind, 0, "latin1");
    header.writeUInt32BE(packet.length, 1);
    fs.writeSync(out, header);
    fs.writeSync(out, packet);
    if (kind === "V") {
      if (result.received.video === 0) result.timeline_ms.first_video_packet = since();
      result.received.video += 1;
      if (packet[1] & 0x80) {
        if (result.received.video_frames === 0) result.timeline_ms.first_video_frame = since();
        if (result.frame_ms.length < 60) result.frame_ms.push(since());
        result.received.video_frames += 1;
      }
    } else {
      result.received.audio += 1;
    }
  };
  const videoMedia = new ndc.Video("0", "RecvOnly");
  videoMedia.addVP8Codec(96);
  videoMedia.addH264Codec(102);
  const videoTrack = pc.addTrack(videoMedia);
  videoTrack.setMediaHandler(new ndc.RtcpReceivingSession());
  videoTrack.onMessage(keep("V"));
  const audioMedia = new ndc.Audio("1", "RecvOnly");
  audioMedia.addOpusCodec(111);
  const audioTrack = pc.addTrack(audioMedia);
  audioTrack.setMediaHandler(new ndc.RtcpReceivingSession());
  audioTrack.onMessage(keep("A"));
  watchState(pc, () => {
    setTimeout(() => {
      fs.closeSync(out);
      pc.close();
      finish(0);
    }, args.seconds * 1000);
  });
  whenGathered(pc, () => exchange(pc));
}

setTimeout(() => {
  result.errors.push(`no result within ${args.timeout || 30} s`);
  finish(1);
}, (args.timeout || 30) * 1000);

if (args.mode === "publish") publish();
else view();
