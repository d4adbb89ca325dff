"""What the mark is: a keyed, low-frequency spread-spectrum pattern on a coarse grid of chips, read by
correlation.

The picture is divided into square chips, `CHIPS_PER_HEIGHT` down its height whatever its size (a rescale
keeps the grid), smoothed into each other (bilinear); a `TILE` x `TILE` tile of chips repeats over it (a crop
only shifts the tile). Every chip sums `1 + PAYLOAD_BITS` orthogonal +/-1 sequences (Walsh-Hadamard rows times
one public scrambling): row 0, fixed by the product, is the public layer anyone can find; the payload's rows,
order and signs come from HMAC-SHA256 of the key, so without it the payload is neither readable nor writable.
Payload (40 bits): key id (8), session code (12), time code (12, minutes since the epoch modulo 4096) and an
8-bit check (HMAC of the 32), so a wrong key or a misread reads as nothing rather than as garbage.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
from dataclasses import dataclass

import numpy as np

CHIPS_PER_HEIGHT = 40
TILE = 32
PAYLOAD_BITS = 40
DATA_BITS = 32
PUBLIC_SEED = b"livefuse public mark v1"
PUBLIC_SHARE = 0.5  # of the mark's energy in the public layer; the rest carries the payload

UNRELIABLE = 10  # the weakest soft bits a payload read may flip
MAX_FLIPS = 3  # at most this many of them

KEY_ID_BITS, SESSION_BITS, TIME_BITS, CHECK_BITS = 8, 12, 12, 8


@dataclass(frozen=True)
class Payload:
    """What the keyed layer says: which key (its id), which session (its code under that key), and when
    (minutes since the Unix epoch, modulo 4096: a 68-hour wheel)."""

    key_id: int
    session_code: int
    time_code: int

    def __post_init__(self) -> None:
        for name, value, bits in (
            ("key_id", self.key_id, KEY_ID_BITS),
            ("session_code", self.session_code, SESSION_BITS),
            ("time_code", self.time_code, TIME_BITS),
        ):
            if not 0 <= value < 1 << bits:
                raise ValueError(f"{name} {value} does not fit {bits} bits")

    def as_dict(self) -> dict[str, int]:
        return {"key_id": self.key_id, "session_code": self.session_code, "time_code": self.time_code}


def key_id(key: bytes) -> int:
    """The key's public name (8 bits): stated in metadata and headers, so a reader knows which key to try."""
    return hashlib.sha256(b"livefuse mark key id" + key).digest()[0]


def session_code(key: bytes, session_id: str) -> int:
    """A session's 12-bit code under the key (the gateway logs and shows it beside the session's id)."""
    digest = hmac.new(key, b"session " + session_id.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:2], "big") & ((1 << SESSION_BITS) - 1)


def time_code(unix_s: float) -> int:
    return int(unix_s // 60) % (1 << TIME_BITS)


def _check(key: bytes, data: int) -> int:
    digest = hmac.new(key, b"check " + data.to_bytes(4, "big"), hashlib.sha256).digest()
    return digest[0]


def payload_bits(key: bytes, payload: Payload) -> np.ndarray:
    """The 40 bits as +/-1 (float32), data then check, each flipped by the key's mask (so equal payloads
    under different keys share nothing)."""
    data = (payload.key_id << 24) | (payload.session_code << 12) | payload.time_code
    word = (data << CHECK_BITS) | _check(key, data)
    bits = np.array([(word >> (PAYLOAD_BITS - 1 - i)) & 1 for i in range(PAYLOAD_BITS)], dtype=np.int8)
    return (1 - 2 * (bits ^ _mask(key))).astype(np.float32)


def read_payload(key: bytes, soft: np.ndarray) -> Payload | None:
    """The payload from 40 soft bits (the sign is the bit), or None when the check fails."""
    bits = (np.asarray(soft) < 0).astype(np.int8) ^ _mask(key)
    word = 0
    for bit in bits.tolist():
        word = (word << 1) | int(bit)
    data, check = word >> CHECK_BITS, word & ((1 << CHECK_BITS) - 1)
    if _check(key, data) != check:
        return None
    found = Payload(data >> 24, (data >> 12) & 0xFFF, data & 0xFFF)
    return found if found.key_id == key_id(key) else None


def decode_payload(key: bytes, soft: np.ndarray) -> Payload | None:
    """The payload from 40 soft bits, correcting up to `MAX_FLIPS` of the `UNRELIABLE` weakest bits
    (Chase decoding): the candidates, fewest and weakest flips first, are held to the check and the key id
    (16 bits), so a soft vector that carries no payload passes with odds of about 1 in 370 at most."""
    soft = np.asarray(soft, np.float32)
    found = read_payload(key, soft)
    if found is not None:
        return found
    weakest = np.argsort(np.abs(soft))[:UNRELIABLE]
    candidates = [
        flips for n in range(1, MAX_FLIPS + 1) for flips in itertools.combinations(weakest.tolist(), n)
    ]
    candidates.sort(key=lambda flips: float(np.sum(np.abs(soft[list(flips)]))))
    for flips in candidates:
        trial = soft.copy()
        trial[list(flips)] *= -1
        found = read_payload(key, trial)
        if found is not None:
            return found
    return None


def _mask(key: bytes) -> np.ndarray:
    stream = hmac.new(key, b"bit mask", hashlib.sha256).digest()
    return np.unpackbits(np.frombuffer(stream[: PAYLOAD_BITS // 8], np.uint8)).astype(np.int8)


def _hadamard(n: int) -> np.ndarray:
    h = np.ones((1, 1), np.float32)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h


def _rng(seed: bytes) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(seed).digest()[:16], "big"))


@dataclass(frozen=True)
class Layers:
    """The tile's sequences: `public` (TILE x TILE, +/-1) and, with a key, `payload` (PAYLOAD_BITS x TILE x
    TILE, +/-1, orthogonal to the public one and to each other)."""

    public: np.ndarray
    payload: np.ndarray | None


def public_layer() -> np.ndarray:
    """Row 0 of the Hadamard matrix (all ones) times the public scrambling: a white +/-1 tile."""
    return _scrambling().reshape(TILE, TILE)


def _scrambling() -> np.ndarray:
    return _rng(PUBLIC_SEED).choice(np.array([-1.0, 1.0], np.float32), size=TILE * TILE)


def layers(key: bytes | None) -> Layers:
    """The public tile, and the key's payload tiles (rows of the Hadamard matrix other than row 0, chosen and
    ordered by the key)."""
    scramble = _scrambling()
    public = scramble.reshape(TILE, TILE)
    if key is None:
        return Layers(public, None)
    rows = 1 + _rng(b"rows " + hmac.new(key, b"rows", hashlib.sha256).digest()).permutation(TILE * TILE - 1)
    chosen = _hadamard(TILE * TILE)[rows[:PAYLOAD_BITS]] * scramble
    return Layers(public, chosen.reshape(PAYLOAD_BITS, TILE, TILE).astype(np.float32))


def coefficients(key: bytes | None, payload: Payload | None) -> tuple[np.ndarray, np.ndarray]:
    """The layers to embed (L x TILE x TILE, +/-1) and their nominal coefficients (unit RMS in all): the
    public layer alone without a key, else the public layer with `PUBLIC_SHARE` of the energy and the
    payload's bits (as signs) with the rest."""
    found = layers(key)
    if found.payload is None or payload is None or key is None:
        return found.public[None], nominal(None, None)
    return np.concatenate([found.public[None], found.payload]), nominal(key, payload)


def nominal(key: bytes | None, payload: Payload | None) -> np.ndarray:
    """`coefficients`' second half alone (the layers stay those of the key; only the payload's time code
    turns): 1 for the public layer without a key or payload, else its share and the payload's bits."""
    if payload is None or key is None:
        return np.ones(1, np.float32)
    bits = payload_bits(key, payload) * np.float32(np.sqrt((1.0 - PUBLIC_SHARE) / PAYLOAD_BITS))
    return np.concatenate([[np.float32(np.sqrt(PUBLIC_SHARE))], bits]).astype(np.float32)


def chip_size(height: int) -> float:
    """A chip's side in pixels for a picture of this height."""
    return height / CHIPS_PER_HEIGHT
