#!/usr/bin/env python3
"""Spoken-word clips for examples/audio_classify, made on any Debian machine.

  /usr/bin/python3 examples/audio_classify/make_data.py OUT_DIR [--words yes,no,...] [--per-word N]

Every clip is one word spoken by espeak-ng with a voice, a speed and a pitch drawn at random (a
seeded draw, so the same options give the same files), resampled to 16 kHz by sox, shifted by up to
0.25 s of leading silence, cut or padded to one second and mixed with white noise at a random
level. The clips are written as 16-bit mono WAV in SpeechCommands' layout, one folder per word:

  OUT_DIR/train/<word>/<n>.wav   (80% of each word's clips)
  OUT_DIR/test/<word>/<n>.wav    (20%, spoken with voice variants the training clips never use)

Needs espeak-ng and sox (scripts/test.sh installs both). 8 words x 150 clips take about a minute
on two cores.
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

# espeak-ng's own English voices (no mbrola needed) and its voice variants.
VOICES = ["en-gb", "en-us", "en-gb-scotland", "en-gb-x-gbclan", "en-gb-x-rp", "en-gb-x-gbcwmd", "en-029"]
VARIANTS = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5", "croak", "klatt", "klatt2",
            "klatt3", "whisper", "Andy", "Denis", "Gene", "Jacky", "Michael", "Storm", "Tweaky", "aunty", "boris",
            "edward", "kaukovalta", "linda", "max", "michel", "norbert", "quincy", "rob", "robert", "steph",
            "steph2", "steph3", "travis", "zac"]
# Test clips use these variants only, so the test set measures generalisation to unheard speakers.
TEST_VARIANTS = {"m3", "f2", "klatt2", "Gene", "linda", "rob", "steph2"}


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {r.stderr.decode(errors='replace').strip()}")


def make_clip(job):
    word, path, voice, speed, pitch, shift, noise, seed, tmp = job
    raw = os.path.join(tmp, os.path.basename(path) + "." + word + ".raw.wav")
    run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", raw, word])
    # sox -R: repeatable noise. The clip: 16 kHz mono, `shift` s of silence first, then one second.
    clip = raw + ".clip.wav"
    run(["sox", "-R", raw, "-r", "16000", "-c", "1", "-b", "16", clip, "pad", f"{shift:.3f}", "1", "trim", "0", "1"])
    noisy = raw + ".noise.wav"
    run(["sox", "-R", "-n", "-r", "16000", "-c", "1", "-b", "16", noisy, "synth", "1", "whitenoise", "vol",
         f"{noise:.4f}"])
    run(["sox", "-R", "-m", clip, noisy, "-b", "16", path, "trim", "0", "1"])
    for f in (raw, clip, noisy):
        os.remove(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="output folder (train/ and test/ are replaced)")
    ap.add_argument("--words", default="yes,no,up,down,left,right,stop,go", help="comma-separated words (classes)")
    ap.add_argument("--per-word", type=int, default=150, help="clips per word (default 150)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    for tool in ("espeak-ng", "sox"):
        if shutil.which(tool) is None:
            sys.exit(f"make_data.py: {tool} is not installed (apt-get install {tool}, or run scripts/test.sh)")
    words = [w.strip() for w in args.words.split(",") if w.strip()]
    if len(words) < 2 or args.per_word < 5:
        sys.exit("make_data.py: need at least 2 words and 5 clips per word")
    rng = random.Random(args.seed)
    train_variants = [v for v in VARIANTS if v not in TEST_VARIANTS]
    test_variants = sorted(TEST_VARIANTS)
    for split in ("train", "test"):
        shutil.rmtree(os.path.join(args.out, split), ignore_errors=True)
    jobs = []
    tmp = tempfile.mkdtemp(prefix="audio_classify_")
    try:
        for word in words:
            n_test = max(1, args.per_word // 5)
            for i in range(args.per_word):
                split = "test" if i < n_test else "train"
                variant = rng.choice(test_variants if split == "test" else train_variants)
                voice = rng.choice(VOICES) + "+" + variant
                folder = os.path.join(args.out, split, word)
                os.makedirs(folder, exist_ok=True)
                jobs.append((word, os.path.join(folder, f"{i:04d}.wav"), voice, rng.randint(120, 220),
                             rng.randint(20, 80), rng.uniform(0.0, 0.25), rng.uniform(0.002, 0.03), args.seed, tmp))
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            list(pool.map(make_clip, jobs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_test = sum(1 for j in jobs if os.sep + "test" + os.sep in j[1])
    print(f"{len(jobs)} clips of {len(words)} words in {args.out}: {len(jobs) - n_test} train, {n_test} test")


if __name__ == "__main__":
    main()
