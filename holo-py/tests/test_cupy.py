"""holo <-> CuPy through DLPack, on the GPU machine (issue 13, item 7).

Run from the repo root after building the extension (see holo-py/README.md):

    PYTHONPATH=<dir holding holo_py.abi3.so> python3 holo-py/tests/test_cupy.py

Each test provokes an ordering rule with a delay on the producer's stream, so a consumer
that was not ordered after the producer would read the earlier bytes:

1. export: holo's source holds its stream back 200 ms, then fills frame k with k + 1;
   `cupy.from_dlpack(frame)` (CuPy passes its current stream) returns at once, and CuPy's
   reads on its stream see k + 1 in every byte. Dropping CuPy's array runs the capsule's
   deleter, and holo's slot comes back to its pool.
2. import: CuPy spins a kernel 200 ms on its stream, then fills its array with 7 there;
   holo imports the array (`__dlpack__(stream=-1)`: no producer synchronization),
   refuses a read before the readiness contract (ProtocolError), takes CuPy's stream
   with `set_readiness_stream`, and reads 7 in every byte on a stream of its own.
"""

import sys
import time

import cupy as cp
import numpy as np

import holo_py

MIB = 1 << 20
DELAY_MS = 200


def test_export_orders_cupys_stream_after_holos_writes():
    src = holo_py.FrameSource(MIB, DELAY_MS, frames=3)
    stream = cp.cuda.Stream(non_blocking=True)
    full = src.slot_count
    assert full >= 3, f"the source's pool has {full} slots"
    with stream:
        for k in range(1, 4):
            frame = src.next()
            t0 = time.perf_counter()
            array = cp.from_dlpack(frame)
            handoff_ms = (time.perf_counter() - t0) * 1e3
            assert handoff_ms < DELAY_MS / 2, f"from_dlpack waited on the host: {handoff_ms:.1f} ms"
            assert array.dtype == cp.uint8 and array.shape == (MIB,)
            low, high = int(array.min()), int(array.max())
            assert low == high == k, f"frame {k}: CuPy read {low}..{high}, not {k}"
            del array, frame
    # The capsules' deleters ran when CuPy freed the arrays: every slot comes back.
    deadline = time.time() + 5
    while src.free_slots() != full and time.time() < deadline:
        time.sleep(0.01)
    assert src.free_slots() == full, f"{src.free_slots()} of {full} slots free after CuPy dropped its arrays"
    print("  " + src.close().splitlines()[0])
    print(f"  export: 3 frames read by CuPy on its stream, hand-off {handoff_ms:.2f} ms, slots back")


SPIN = cp.RawKernel(
    r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
}
""",
    "spin",
)


def test_import_waits_on_cupys_stream():
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x = cp.zeros(MIB, dtype=cp.uint8)
        stream.synchronize()
        rate_khz = cp.cuda.Device().attributes["ClockRate"]
        SPIN((1,), (1,), (np.int64(rate_khz * DELAY_MS),))
        x.fill(7)
    t0 = time.perf_counter()
    code, data = holo_py.import_and_read(x, stream.ptr, MIB)
    elapsed_ms = (time.perf_counter() - t0) * 1e3
    assert code == "ProtocolError", f"a read before set_readiness_stream gave {code}"
    got = np.frombuffer(bytes(data), dtype=np.uint8)
    assert (got == 7).all(), f"holo read {got.min()}..{got.max()} before CuPy's fill"
    print(f"  import: refused before the contract ({code}), then 7 in every byte after {elapsed_ms:.0f} ms")


def main():
    print(f"CuPy {cp.__version__}, NumPy {np.__version__}, {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    failed = 0
    for test in (test_export_orders_cupys_stream_after_holos_writes, test_import_waits_on_cupys_stream):
        try:
            test()
            print(f"ok   {test.__name__}")
        except Exception as e:  # noqa: BLE001 - report every failure and go on
            failed += 1
            print(f"FAIL {test.__name__}: {type(e).__name__}: {e}")
    print(f"{2 - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
