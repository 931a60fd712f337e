#!/usr/bin/env python3
"""torchaudio 0.13's values for tests/audio/test_torchaudio.cpp, in one process.

  /usr/bin/python3 tests/audio/torchaudio_reference.py OUT_DIR

Writes OUT_DIR/<case>.npy for every input and output the C++ test compares (inputs are drawn here
from fixed seeds, so both sides see the same numbers).
"""
import os
import sys
import warnings

import numpy as np
import torch
import torchaudio
import torchaudio.functional as F
import torchaudio.transforms as T

warnings.filterwarnings("ignore")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, t):
    np.save(os.path.join(out, name + ".npy"), t.detach().numpy())


g = torch.Generator().manual_seed(46)
wave32 = torch.randn(2, 3, 1000, generator=g)
wave64 = torch.randn(2, 777, generator=g, dtype=torch.float64)
save("wave32", wave32)
save("wave64", wave64)

# resample: (name, input, orig, new, width, rolloff, method, beta)
resamples = [
    ("resample_16000_8000", wave32, 16000, 8000, 6, 0.99, "sinc_interpolation", None),
    ("resample_44100_16000", wave32, 44100, 16000, 6, 0.99, "sinc_interpolation", None),
    ("resample_8000_11025_kaiser", wave32, 8000, 11025, 6, 0.99, "kaiser_window", None),
    ("resample_3_5_w4_r09", wave32, 3, 5, 4, 0.9, "sinc_interpolation", None),
    ("resample_48000_44100_kaiser_b8", wave64, 48000, 44100, 16, 0.95, "kaiser_window", 8.0),
    ("resample_22050_16000_f64", wave64, 22050, 16000, 6, 0.99, "sinc_interpolation", None),
]
for name, x, o, n, w, r, m, b in resamples:
    save(name, F.resample(x, o, n, lowpass_filter_width=w, rolloff=r, resampling_method=m, beta=b))
save("Resample_44100_16000", T.Resample(44100, 16000)(wave32))

# melscale_fbanks: (name, n_freqs, f_min, f_max, n_mels, sample_rate, norm, mel_scale)
fbanks = [
    ("fbanks_htk", 201, 0.0, 8000.0, 64, 16000, None, "htk"),
    ("fbanks_slaney_slaney", 257, 20.0, 7600.0, 40, 16000, "slaney", "slaney"),
    ("fbanks_slaney_scale", 129, 0.0, 4000.0, 23, 8000, None, "slaney"),
    ("fbanks_htk_slaney_norm", 513, 50.0, 22050.0, 128, 44100, "slaney", "htk"),
]
for name, nf, lo, hi, nm, sr, norm, scale in fbanks:
    save(name, F.melscale_fbanks(nf, lo, hi, nm, sr, norm, scale))

save("dct_13_40_ortho", F.create_dct(13, 40, "ortho"))
save("dct_20_64_none", F.create_dct(20, 64, None))

spec = torch.randn(2, 10, 30, generator=g)
save("spec", spec)
save("deltas_5_replicate", F.compute_deltas(spec, 5, "replicate"))
save("deltas_7_reflect", F.compute_deltas(spec, 7, "reflect"))
save("deltas_3_circular", F.compute_deltas(spec, 3, "circular"))

power = torch.rand(2, 3, 20, 30, generator=g) ** 4 * 100
save("power", power)
save("db_power_top80", F.amplitude_to_DB(power, 10.0, 1e-10, 0.0, 80.0))
save("db_3d_top40", F.amplitude_to_DB(power[0], 20.0, 1e-5, 0.5, 40.0))
save("db_2d_none", F.amplitude_to_DB(power[0, 0], 10.0, 1e-10, 0.0, None))
save("AmplitudeToDB_magnitude_60", T.AmplitudeToDB("magnitude", 60.0)(power))
db = torch.randn(4, 50, generator=g) * 20
save("db", db)
save("db_to_amp_power", F.DB_to_amplitude(db, 1.0, 1.0))
save("db_to_amp_amplitude", F.DB_to_amplitude(db, 2.0, 0.5))

audio = torch.rand(2, 400, generator=g) * 2 - 1
save("audio", audio)
for shape in ["linear", "exponential", "logarithmic", "quarter_sine", "half_sine"]:
    save("fade_" + shape, T.Fade(100, 50, shape)(audio))
save("vol_amplitude", T.Vol(1.7)(audio))
save("vol_db", T.Vol(6.0, "db")(audio))
save("vol_power", T.Vol(0.3, "power")(audio))
save("gain_m3", F.gain(audio, -3.0))

stft = torch.rand(2, 201, 50, generator=g)
save("stft", stft)
save("MelScale_64", T.MelScale(n_mels=64, sample_rate=16000, n_stft=201)(stft))
save("MelScale_slaney", T.MelScale(40, 22050, 30.0, 10000.0, 201, "slaney", "slaney")(stft))
