"""Haul's server CPU per file for N x 4 KiB added by batch on tmpfs, measured in slices of 10,000 (does it grow?).
python3 bench/list_growth.py BINARY COUNT [perf-from-slice]; SLICE=N sets the slice (default 10,000)."""
import os, shutil, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench
binary, count = sys.argv[1], int(sys.argv[2])
perf_from = int(sys.argv[3]) if len(sys.argv) > 3 else None
base = "/dev/shm/grow"
shutil.rmtree(base, ignore_errors=True)
os.makedirs(base + "/www")
os.chmod(base + "/www", 0o755)
bench.make_file(base + "/www/one.bin", 4096)
nginx, origin = bench.start_nginx(base + "/www", base + "/nginx", "location /l/ { try_files /one.bin =404; }")
haul = bench.Haul(binary, base + "/haul", "--max-active", "16", "--connections", "1", "--max-downloads", str(count))
pid = haul.proc.pid
slice_ = int(os.environ.get("SLICE", "10000"))
perf = None
try:
    for s in range(0, count, slice_):
        if perf_from is not None and s == perf_from * slice_:
            perf = subprocess.Popen(["perf", "record", "-F", "2000", "-g", "-p", str(pid), "-o", "perf.data"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        cpu0 = bench.proc_stat(pid)[0]
        t0 = time.monotonic()
        for i in range(s, s + slice_, 1000):
            haul.call("POST", "/downloads", {"downloads": [{"url": f"{origin}/l/f{j:06d}.bin"} for j in range(i, i + 1000)]})
        haul.wait_all(s + slice_, poll=0.02)
        cpu = bench.proc_stat(pid)[0] - cpu0
        print(f"{s + slice_:>7}: {time.monotonic() - t0:.2f} s, {cpu / slice_ * 1000:.3f} ms CPU a file", flush=True)
        if perf:
            perf.send_signal(2)
            perf.wait()
            perf = None
finally:
    haul.stop()
    nginx.terminate()
    shutil.rmtree(base, ignore_errors=True)
