// audio::functional and audio::transforms against torchaudio 0.13 (Debian's python3-torchaudio):
// torchaudio_reference.py draws the inputs and writes torchaudio's outputs as .npy files, in one
// Python process for every case; each case here computes the same from the same inputs.
#include <gtest/gtest.h>

#include <string>

#include "nabla.h"
#include "tests/audio/torchaudio_refs.h"
#include "tests/common/python_torch.h"

using namespace nabla;
namespace AF = nabla::audio::functional;
namespace AT = nabla::audio::transforms;

using nabla_test::TorchaudioRefs;

TEST(AudioTorchaudio, FunctionalAndTransformsMatchTorchaudio) {
  NABLA_NEEDS_PYTHON_MODULES("torch, torchaudio");
  nabla_test::TempDir dir;
  TorchaudioRefs ref(dir);
  if (!ref.run("audio/torchaudio_reference.py")) return;
  const Tensor w32 = ref["wave32"], w64 = ref["wave64"];

  ref.expect("resample_16000_8000", AF::resample(w32, 16000, 8000), 2e-6);
  ref.expect("resample_44100_16000", AF::resample(w32, 44100, 16000), 2e-6);
  ref.expect("resample_8000_11025_kaiser", AF::resample(w32, 8000, 11025, 6, 0.99, "kaiser_window"), 2e-6);
  ref.expect("resample_3_5_w4_r09", AF::resample(w32, 3, 5, 4, 0.9), 2e-6);
  // torchaudio divides the Kaiser window by i0(beta) of a float32 tensor (2e-7 off), nabla by the exact value.
  ref.expect("resample_48000_44100_kaiser_b8", AF::resample(w64, 48000, 44100, 16, 0.95, "sinc_interp_kaiser", 8.0),
             2e-6);
  ref.expect("resample_22050_16000_f64", AF::resample(w64, 22050, 16000), 1e-12);
  ref.expect("Resample_44100_16000", AT::Resample(44100, 16000)(w32), 2e-6);

  // The mel points come from linspace, whose float32 values nabla rounds from float64 and PyTorch
  // computes in float32: an ulp apart at times, which the triangles' slopes magnify to ~1e-5.
  ref.expect("fbanks_htk", AF::melscale_fbanks(201, 0, 8000, 64, 16000, "", "htk"), 2e-5);
  ref.expect("fbanks_slaney_slaney", AF::melscale_fbanks(257, 20, 7600, 40, 16000, "slaney", "slaney"), 2e-5);
  ref.expect("fbanks_slaney_scale", AF::melscale_fbanks(129, 0, 4000, 23, 8000, "", "slaney"), 2e-5);
  ref.expect("fbanks_htk_slaney_norm", AF::melscale_fbanks(513, 50, 22050, 128, 44100, "slaney", "htk"), 2e-5);

  ref.expect("dct_13_40_ortho", AF::create_dct(13, 40, "ortho"), 1e-6);
  ref.expect("dct_20_64_none", AF::create_dct(20, 64, ""), 1e-6);

  const Tensor spec = ref["spec"];
  ref.expect("deltas_5_replicate", AF::compute_deltas(spec, 5, "replicate"), 1e-6);
  ref.expect("deltas_7_reflect", AF::compute_deltas(spec, 7, "reflect"), 1e-6);
  ref.expect("deltas_3_circular", AT::ComputeDeltas(3, "circular")(spec), 1e-6);

  const Tensor power = ref["power"];
  ref.expect("db_power_top80", AF::amplitude_to_DB(power, 10, 1e-10, 0, 80.0), 1e-5);
  ref.expect("db_3d_top40", AF::amplitude_to_DB(power.select(0, 0), 20, 1e-5, 0.5, 40.0), 1e-5);
  ref.expect("db_2d_none", AF::amplitude_to_DB(power.select(0, 0).select(0, 0), 10, 1e-10, 0), 1e-5);
  ref.expect("AmplitudeToDB_magnitude_60", AT::AmplitudeToDB("magnitude", 60.0)(power), 1e-5);
  const Tensor db = ref["db"];
  // Up to 1e7: compared relative to torchaudio's values.
  ref.expect("db_to_amp_power", AF::DB_to_amplitude(db, 1.0, 1.0) / ref["db_to_amp_power"] - 1.0, 1e-6, true);
  ref.expect("db_to_amp_amplitude", AF::DB_to_amplitude(db, 2.0, 0.5) / ref["db_to_amp_amplitude"] - 1.0, 1e-6, true);

  const Tensor audio = ref["audio"];
  for (const char* shape : {"linear", "exponential", "logarithmic", "quarter_sine", "half_sine"})
    ref.expect(std::string("fade_") + shape, AT::Fade(100, 50, shape)(audio), 1e-6);
  ref.expect("vol_amplitude", AT::Vol(1.7)(audio), 1e-6);
  ref.expect("vol_db", AT::Vol(6.0, "db")(audio), 1e-6);
  ref.expect("vol_power", AT::Vol(0.3, "power")(audio), 1e-6);
  ref.expect("gain_m3", AF::gain(audio, -3.0), 1e-6);

  const Tensor stft = ref["stft"];
  ref.expect("MelScale_64", AT::MelScale({.n_mels = 64, .sample_rate = 16000, .n_stft = 201})(stft), 1e-4);
  ref.expect("MelScale_slaney",
             AT::MelScale({.n_mels = 40,
                           .sample_rate = 22050,
                           .f_min = 30.0,
                           .f_max = 10000.0,
                           .n_stft = 201,
                           .norm = "slaney",
                           .mel_scale = "slaney"})(stft),
             2e-5);
}
