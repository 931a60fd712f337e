#!/usr/bin/env python3
"""torchaudio 0.13's STFT-based transforms for tests/audio/test_torchaudio_spectral.cpp, in one process.

  /usr/bin/python3 tests/audio/torchaudio_spectral_reference.py OUT_DIR

Writes OUT_DIR/<case>.npy: the inputs (drawn here from fixed seeds), torchaudio's outputs (complex
ones as view_as_real) and the gradients of sum(output * weight) for a weight also saved here.
"""
import os
import sys
import warnings

import numpy as np
import torch
import torchaudio.functional as F
import torchaudio.transforms as T

warnings.filterwarnings("ignore")
out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, t):
    t = t.detach()
    if t.is_complex():
        t = torch.view_as_real(t)
    np.save(os.path.join(out, name + ".npy"), t.numpy())


g = torch.Generator().manual_seed(4646)
wave = torch.randn(2, 3, 1601, generator=g)  # (batch, channel, time), an odd length
wave64 = torch.randn(2, 997, generator=g, dtype=torch.float64)  # a prime length
save("wave", wave)
save("wave64", wave64)

save("Spectrogram_default", T.Spectrogram()(wave))
save("Spectrogram_511_w300_h77_pad5_mag_window",
     T.Spectrogram(n_fft=511, win_length=300, hop_length=77, pad=5, power=1.0, normalized=True)(wave))
save("Spectrogram_256_complex_frame_hamming_nocenter",
     T.Spectrogram(n_fft=256, power=None, normalized="frame_length", window_fn=torch.hamming_window,
                   center=False)(wave))
save("Spectrogram_200_p1.5_constant_twosided",
     T.Spectrogram(n_fft=200, hop_length=50, power=1.5, pad_mode="constant", onesided=False)(wave))
save("spectrogram_f64_kaiser",
     F.spectrogram(wave64, 3, torch.kaiser_window(128, True, 8.0, dtype=torch.float64), 128, 32, 128, 2.0, False))

spec_c = T.Spectrogram(n_fft=256, hop_length=64, power=None)(wave)
save("spec_c", spec_c)
save("InverseSpectrogram_256_len1601", T.InverseSpectrogram(n_fft=256, hop_length=64)(spec_c, 1601))
save("InverseSpectrogram_256_nolen", T.InverseSpectrogram(n_fft=256, hop_length=64)(spec_c))
spec_c64 = F.spectrogram(wave64, 7, torch.hann_window(120, dtype=torch.float64), 160, 40, 120, None, True)
save("spec_c64", spec_c64)
save("inverse_spectrogram_f64_pad7_window",
     F.inverse_spectrogram(spec_c64, 997, 7, torch.hann_window(120, dtype=torch.float64), 160, 40, 120, True))

power64 = F.spectrogram(wave64, 0, torch.hann_window(128, dtype=torch.float64), 128, 32, 128, 2.0, False)
save("power64", power64)
save("griffinlim_f64_8", F.griffinlim(power64, torch.hann_window(128, dtype=torch.float64), 128, 32, 128, 2.0, 8,
                                      0.99, 997, False))
save("griffinlim_f64_nomomentum", F.griffinlim(power64, torch.hann_window(128, dtype=torch.float64), 128, 32, 128,
                                               2.0, 4, 0.0, None, False))
save("GriffinLim_256_f32", T.GriffinLim(n_fft=256, n_iter=4, hop_length=64, rand_init=False)(spec_c.abs() ** 2))

save("MelSpectrogram_400_160_64", T.MelSpectrogram(sample_rate=16000, n_fft=400, hop_length=160, n_mels=64)(wave))
save("MelSpectrogram_slaney",
     T.MelSpectrogram(sample_rate=22050, n_fft=512, win_length=400, hop_length=128, f_min=30.0, f_max=9000.0,
                      n_mels=40, power=1.0, norm="slaney", mel_scale="slaney")(wave))
save("MFCC_13", T.MFCC(n_mfcc=13, melkwargs={"n_fft": 400, "hop_length": 160, "n_mels": 40})(wave))
save("MFCC_log_8000", T.MFCC(sample_rate=8000, n_mfcc=20, norm=None, log_mels=True,
                             melkwargs={"n_fft": 256, "n_mels": 32})(wave))
save("LFCC_default", T.LFCC()(wave))
save("LFCC_64_20_log", T.LFCC(sample_rate=8000, n_filter=64, n_lfcc=20, f_min=100.0, f_max=3500.0, log_lf=True,
                              speckwargs={"n_fft": 512, "hop_length": 128})(wave))
save("linear_fbanks_257_64", F.linear_fbanks(257, 50.0, 7000.0, 64, 16000))

spec201 = T.Spectrogram(n_fft=400, hop_length=100, power=None)(wave)
save("spec201", spec201)
save("TimeStretch_1.3", T.TimeStretch(hop_length=100, n_freq=201, fixed_rate=1.3)(spec201))
save("TimeStretch_0.7", T.TimeStretch(n_freq=201)(spec201, 0.7))
spec_c64_129 = F.spectrogram(wave64, 0, torch.hann_window(256, dtype=torch.float64), 256, 64, 256, None, False)
save("spec_c64_129", spec_c64_129)
save("phase_vocoder_f64_1.7",
     F.phase_vocoder(spec_c64_129, 1.7, torch.linspace(0, np.pi * 64, 129, dtype=torch.float64)[..., None]))


# Gradients of sum(f(x) * weight), the weight drawn here (float64 inputs: tight comparisons).
def grad(name, f, x):
    x = x.detach().clone().requires_grad_(True)
    y = f(x)
    yr = torch.view_as_real(y) if y.is_complex() else y
    w = torch.randn(yr.shape, generator=g, dtype=yr.dtype)
    (yr * w).sum().backward()
    save(name + "_w", w)
    save(name + "_grad", x.grad if not x.grad.is_complex() else x.grad)


x64 = torch.randn(2, 640, generator=g, dtype=torch.float64)
save("x64", x64)
grad("MelSpectrogram", lambda x: T.MelSpectrogram(n_fft=128, hop_length=32, n_mels=16).double()(x), x64)
grad("MFCC", lambda x: T.MFCC(n_mfcc=8, log_mels=True, melkwargs={"n_fft": 128, "n_mels": 16}).double()(x), x64)
grad("LFCC", lambda x: T.LFCC(n_filter=16, n_lfcc=8, speckwargs={"n_fft": 64}).double()(x), x64)
f64 = {"dtype": torch.float64}  # float64 windows: no float32 rounding in these two gradients
grad("Spectrogram_complex", lambda x: T.Spectrogram(n_fft=100, hop_length=25, power=None, wkwargs=f64)(x), x64)
s64 = F.spectrogram(x64, 0, torch.hann_window(128, dtype=torch.float64), 128, 32, 128, None, False)
save("s64", s64)
grad("TimeStretch", lambda s: T.TimeStretch(hop_length=32, n_freq=65, fixed_rate=1.25).double()(s), s64)
grad("InverseSpectrogram", lambda s: T.InverseSpectrogram(n_fft=128, hop_length=32, wkwargs=f64)(s, 640), s64)
p64 = s64.abs() ** 2
save("p64", p64)
grad("GriffinLim", lambda p: F.griffinlim(p, torch.hann_window(128, dtype=torch.float64), 128, 32, 128, 2.0, 3, 0.5,
                                          640, False), p64)
