// Optimizers: five-step trajectories against the documented algorithms, parameter groups,
// options, state dicts and errors.
//
// The problem: f(p) = 0.5 sum_i a_i p_i^2 + sum_i b_i p_i with a = [1, 2, 0.5], b = [0.1, -0.3, 0.2]
// and p0 = [1, -2, 3], so grad f = a * p + b, and the first gradient is g0 = [1.1, -4.3, 1.7].
// The expected trajectories (p after each of 5 steps, 15 numbers) come from
// tests/optim/reference_values.py, which implements the algorithm boxes of torch.optim's documentation
// in plain Python. The first step of each is also derived by hand in the comments.
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend.h"
#include "nabla.h"
#include "optim/fused.h"

using namespace nabla;

namespace {

Tensor quadratic(const Tensor& p) {
  Tensor a = tensor({1.0, 2.0, 0.5}, dtype(p.dtype())), b = tensor({0.1, -0.3, 0.2}, dtype(p.dtype()));
  return (a * p * p).sum() * 0.5 + (b * p).sum();
}

Tensor start(DType dt = kFloat64) { return tensor({1.0, -2.0, 3.0}, dtype(dt)).requires_grad_(); }

// Runs 5 steps and returns the 15 values of p after each step.
std::vector<double> trajectory(optim::Optimizer& opt, Tensor p, int steps = 5) {
  std::vector<double> out;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    quadratic(p).backward();
    const uint32_t version = p.version();
    opt.step();
    // An update is an in-place write: a graph that saved p before the step must see it changed.
    EXPECT_GT(p.version(), version) << "step " << s + 1;
    Tensor c = p.detach().to(kFloat64);
    for (int64_t i = 0; i < 3; ++i) out.push_back(c[i].item<double>());
  }
  return out;
}

void expect_trajectory(const std::vector<double>& got, const std::vector<double>& expect, const std::string& what,
                       double rtol = 1e-12) {
  ASSERT_EQ(got.size(), expect.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expect[i], rtol * std::max(1.0, std::abs(expect[i])))
        << what << ": step " << i / 3 + 1 << " element " << i % 3;
}

template <class Opt, class Options>
void check(const Options& o, const std::vector<double>& expect, const std::string& what, int steps = 5) {
  Tensor p = start();
  Opt opt(std::vector<Tensor>{p}, o);
  expect_trajectory(trajectory(opt, p, steps), expect, what);
  // float32 follows the float64 trajectory closely.
  Tensor p32 = start(kFloat32);
  Opt opt32(std::vector<Tensor>{p32}, o);
  expect_trajectory(trajectory(opt32, p32, steps), expect, what + " (float32)", 2e-5);
  // A strided (non-contiguous) parameter: the optimizers' fused kernels decline it, and the update
  // composed of Tensor ops must follow the same trajectory.
  Tensor ps = tensor({1.0, 0.0, -2.0, 0.0, 3.0, 0.0}, dtype(kFloat64)).slice(0, 0, 6, 2).requires_grad_();
  ASSERT_FALSE(ps.is_contiguous());
  Opt opts(std::vector<Tensor>{ps}, o);
  expect_trajectory(trajectory(opts, ps, steps), expect, what + " (strided parameter)");
}

}  // namespace

TEST(Optim, SGD) {
  // p1 = p0 - 0.1 g0 = [1 - 0.11, -2 + 0.43, 3 - 0.17]
  check<optim::SGD>(optim::SGDOptions{.lr = 0.1},
                    {0.89, -1.57, 2.83, 0.791, -1.226, 2.6685, 0.7019, -0.9508, 2.515075, 0.62171, -0.73064, 2.36932125,
                     0.549539, -0.5545119999999999, 2.2308551875},
                    "sgd");
  // Step 1: g = g0 + 0.01 p0 = [1.11, -4.32, 1.73]; the buffer starts as g (no dampening on the
  // first step); p1 = p0 - 0.1 g = [0.889, -1.568, 2.827].
  check<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01},
                    {0.889, -1.568, 2.827, 0.6992899, -0.8685488000000001, 2.5235407, 0.45598535808999996,
                     -0.05492224208000007, 2.11659681187, 0.1865622013206189, 0.7142770936402719, 1.635195518888167,
                     -0.08187714387186834, 1.3043437695489914, 1.1088788808875503},
                    "sgd momentum");
  // Nesterov, step 1: b = g0, update g0 + 0.9 b = 1.9 g0: p1 = p0 - 0.19 g0 = [0.791, -1.183, 2.677].
  check<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true},
                    {0.7909999999999999, -1.1829999999999998, 2.677, 0.5326099999999999, -0.3281599999999999, 2.246985,
                     0.26005309999999987, 0.3829568000000001, 1.7469729250000001, 0.003276700999999882, 0.848369536,
                     1.212113954625, -0.2150398522900001, 1.04379279872, 0.6742038372231248},
                    "sgd nesterov");
  // maximize: ascends, p1 = p0 + 0.1 g0 = [1.11, -2.43, 3.17].
  check<optim::SGD>(optim::SGDOptions{.lr = 0.1, .momentum = 0.5, .maximize = true},
                    {1.11, -2.43, 3.17, 1.286, -3.1610000000000005, 3.4335, 1.5126, -4.188700000000001, 3.756925,
                     1.78716, -5.570290000000001, 4.12648375, 2.113156, -7.405143000000002, 4.5375873125},
                    "sgd maximize");
}

TEST(Optim, Adam) {
  // Step 1: m = 0.1 g0, v = 0.001 g0^2; the bias corrections give m_hat = g0, v_hat = g0^2, so
  // p1 = p0 - 0.1 g0 / (|g0| + 1e-8) = p0 - 0.1 sign(g0) (up to 1e-9): [0.9, -1.9, 2.9].
  check<optim::Adam>(
      optim::AdamOptions{.lr = 0.1},
      {0.9000000009090909, -1.900000000232558, 2.900000000588235, 0.8003611627734645, -1.8001524222844993,
       2.8000889376942744, 0.70138244621909, -1.700569748619489, 2.700329785128124, 0.6034141152574095,
       -1.6013729687191487, 2.600788218715784, 0.5068637089650823, -1.5026918103983673, 2.5015325503321186},
      "adam");
  // L2 weight decay enters the gradient (g = g0 + 0.1 p0); step 1 is again p0 - 0.1 sign(g).
  check<optim::Adam>(
      optim::AdamOptions{.lr = 0.1, .betas = {0.8, 0.9}, .weight_decay = 0.1},
      {0.9000000008333333, -1.9000000002222222, 2.9000000005, 0.8003967265713181, -1.8001683675714388,
       2.8001006969210227, 0.7015184655384336, -1.7006277905002378, 2.7003722834336608, 0.6037517037238249,
       -1.601508118029025, 2.6008863143385947, 0.5075515726142792, -1.5029458733266707, 2.501714975370726},
      "adam weight_decay");
  // With beta2 = 0.5 the second moment shrinks as the gradient does; amsgrad keeps its maximum
  // (the trajectories part from plain Adam's at step 4).
  check<optim::Adam>(
      optim::AdamOptions{.lr = 0.1, .betas = {0.9, 0.5}, .amsgrad = true},
      {0.9000000009090909, -1.900000000232558, 2.900000000588235, 0.7987470748884633, -1.7993520788357704,
       2.7995889891606662, 0.695276939522035, -1.6976268181160168, 2.698511224317649, 0.5943644318656636,
       -1.595255804125637, 2.596541196938489, 0.49823408577025846, -1.4942731378537284, 2.494761050583624},
      "adam amsgrad");
  check<optim::Adam>(
      optim::AdamOptions{.lr = 0.1, .betas = {0.9, 0.5}},
      {0.9000000009090909, -1.900000000232558, 2.900000000588235, 0.7987470748884633, -1.7993520788357704,
       2.7995889891606662, 0.695276939522035, -1.6976268181160168, 2.698511224317649, 0.5884763009668786,
       -1.5944135728289903, 2.596541196938489, 0.4769670682295331, -1.489319014651522, 2.4934866920458347},
      "adam beta2=0.5 without amsgrad");
}

TEST(Optim, AdamW) {
  // Decoupled decay first: p * (1 - 0.1 * 0.1) = 0.99 p0, then the Adam step of ~0.1 sign(g0):
  // [0.99 - 0.1, -1.98 + 0.1, 2.97 - 0.1] = [0.89, -1.88, 2.87].
  check<optim::AdamW>(
      optim::AdamWOptions{.lr = 0.1, .weight_decay = 0.1},
      {0.8900000009090909, -1.880000000232558, 2.870000000588235, 0.7815122295181712, -1.7613907838648861,
       2.7414205766239172, 0.6748629718781682, -1.6442993062622295, 2.614332792908302, 0.5704334750349395,
       -1.5288618792344755, 2.4888105421219695, 0.4686653266340013, -1.4152242633177934, 2.3649303806268236},
      "adamw");
  check<optim::AdamW>(
      optim::AdamWOptions{.lr = 0.1, .betas = {0.9, 0.5}, .weight_decay = 0.1, .amsgrad = true},
      {0.8900000009090909, -1.880000000232558, 2.870000000588235, 0.779725464396259, -1.7604239953700922,
       2.740766523154713, 0.6687270315977074, -1.6407494070061812, 2.6119577738549875, 0.5619671985415076,
       -1.5221991956844085, 2.4832711834855385, 0.4615902116590334, -1.406809066187451, 2.356614746938934},
      "adamw amsgrad");
  Tensor p = start();
  optim::AdamW opt(std::vector<Tensor>{p});
  EXPECT_DOUBLE_EQ(opt.get_option(0, "weight_decay"), 0.01);  // AdamW's default
  EXPECT_DOUBLE_EQ(opt.lr(), 1e-3);
}

TEST(Optim, RMSprop) {
  // Step 1: v = 0.01 g0^2, p1 = p0 - 0.01 g0 / (0.1 |g0| + 1e-8) = p0 - 0.1 sign(g0) (up to 1e-8).
  check<optim::RMSprop>(
      optim::RMSpropOptions{.lr = 0.01},
      {0.9000000090909083, -1.9000000023255814, 2.9000000058823527, 0.8325478262848031, -1.8308110276302547,
       2.8301724603072898, 0.7791114439875177, -1.7750403008312117, 2.7735507362638003, 0.7339422935351407,
       -1.7272037763689225, 2.7247505779719416, 0.6943897603192702, -1.6847545928783447, 2.6812640201923625},
      "rmsprop");
  // Centered with momentum and weight decay: g = g0 + 0.1 p0; v = 0.01 g^2, a = 0.01 g,
  // d = sqrt(v - a^2) + eps = sqrt(0.0099) |g|; b = g / d; p1 = p0 - 0.01 b = p0 - 0.1005 sign(g).
  check<optim::RMSprop>(
      optim::RMSpropOptions{.lr = 0.01, .weight_decay = 0.1, .momentum = 0.9, .centered = true},
      {0.8994962268915866, -1.8994962207187478, 2.899496223524584, 0.7409607755628557, -1.7391702860894243,
       2.7385376649358495, 0.5480829738723356, -1.5401156426642943, 2.5373677409451765, 0.33812780518199115,
       -1.3164628871853872, 2.3091785441111035, 0.12522349580055703, -1.07875111568571, 2.063512011480842},
      "rmsprop centered");
}

TEST(Optim, Adagrad) {
  // Step 1: s = g0^2, p1 = p0 - 0.1 g0 / (|g0| + 1e-10) = p0 - 0.1 sign(g0).
  check<optim::Adagrad>(
      optim::AdagradOptions{.lr = 0.1},
      {0.9000000000090909, -1.9000000000023256, 2.9000000000058823, 0.8327327206136497, -1.830992466646162,
       2.8303524622918923, 0.7795852579072933, -1.7755121254644068, 2.77402115650522, 0.7347787380850787,
       -1.7280473017759252, 2.7255950261478974, 0.6956459265297522, -1.686036068850727, 2.6825514623863587},
      "adagrad");
  // lr_decay: the step size at step t is lr / (1 + (t - 1) lr_decay); s starts at 0.1.
  check<optim::Adagrad>(
      optim::AdagradOptions{.lr = 0.1, .lr_decay = 0.1, .weight_decay = 0.1, .initial_accumulator_value = 0.1},
      {0.9033012443247466, -1.90024600283488, 2.901227040339919, 0.8431952369886536, -1.8375942482496777,
       2.8383221748705947, 0.7992225314957236, -1.7913035658097576, 2.791533923589095, 0.7646658490008418,
       -1.7546226190712098, 2.7542992114581866, 0.736350183406222, -1.724355841981707, 2.723479775402172},
      "adagrad decay");
}

// Rprop and ASGD: trajectories from PyTorch 1.13 itself (torch.optim.Rprop / ASGD on this problem,
// float64 parameters; ASGD's eta and mu are float32 tensors there).
TEST(Optim, Rprop) {
  // Step 1: prev = 0, so no factor: p1 = p0 - 0.1 sign(g0).
  check<optim::Rprop>(
      optim::RpropOptions{.lr = 0.1},
      {0.9, -1.9, 2.9, 0.78, -1.7799999999999998, 2.78, 0.636, -1.636, 2.6359999999999997, 0.46320000000000006,
       -1.4631999999999998, 2.4631999999999996, 0.25584000000000007, -1.2558399999999998, 2.2558399999999996},
      "rprop");
  check<optim::Rprop>(optim::RpropOptions{.lr = 0.05, .etas = {0.3, 1.5}, .step_sizes = {0.01, 0.2}},
                      {0.95, -1.95, 2.95, 0.875, -1.875, 2.875, 0.7625, -1.7625, 2.7625, 0.59375, -1.59375, 2.59375,
                       0.39375, -1.39375, 2.39375},
                      "rprop etas step_sizes");
  // The state after 5 steps: the last gradient and the step size (0.1 * 1.2^4, below the max).
  Tensor p = start();
  optim::Rprop opt(std::vector<Tensor>{p}, {.lr = 0.1});
  trajectory(opt, p);
  auto sd = opt.state_dict();
  EXPECT_TRUE(
      allclose(sd.at("state.0.prev"), tensor({0.5632, -3.2264, 1.4315999999999998}, dtype(kFloat64)), 1e-12, 1e-14));
  EXPECT_NEAR(sd.at("state.0.step_size")[0].item<double>(), 0.20735999999999996, 1e-15);
  // A sign flip (PyTorch's values): q = 0 -> 1 (step 1, past the minimum at 0.3); the gradient's
  // sign flips, so the step size halves to 0.5, q stays and the gradient is forgotten (prev = 0);
  // then q moves by 0.5, and by 0.5 * 1.2 once the sign holds.
  Tensor q = tensor({0.0}, dtype(kFloat64)).requires_grad_();
  optim::Rprop flip(std::vector<Tensor>{q}, {.lr = 1.0});
  std::vector<double> qs, sizes, prevs;
  for (int i = 0; i < 4; ++i) {
    flip.zero_grad();
    ((q - 0.3) * (q - 0.3)).sum().backward();
    flip.step();
    auto st = flip.state_dict();
    qs.push_back(q.item<double>());
    sizes.push_back(st.at("state.0.step_size").item<double>());
    prevs.push_back(st.at("state.0.prev").item<double>());
  }
  EXPECT_EQ(qs, (std::vector<double>{1.0, 1.0, 0.5, -0.09999999999999998}));
  EXPECT_EQ(sizes, (std::vector<double>{1.0, 0.5, 0.5, 0.6}));
  EXPECT_NEAR(prevs[0], -0.6, 1e-15);
  EXPECT_EQ(prevs[1], 0.0);
  EXPECT_NEAR(prevs[2], 1.4, 1e-15);
  EXPECT_NEAR(prevs[3], 0.4, 1e-15);
}

TEST(Optim, ASGD) {
  // Step 1: p1 = p0 (1 - lambd eta) - eta g0 with eta = float32(0.1).
  check<optim::ASGD>(
      optim::ASGDOptions{.lr = 0.1},
      {0.8899899983607232, -1.5699799935922025, 2.829969997466355, 0.7909828421923347, -1.2259708786654073,
       2.668444410989249, 0.701877987880512, -0.9507685810270543, 2.5149978131416466, 0.6216849735614004,
       -0.7306103076935545, 2.3692260503824567, 0.5495124253864444, -0.5544862258594124, 2.2307452116675117},
      "asgd");
  check<optim::ASGD>(
      optim::ASGDOptions{.lr = 0.1, .lambd = 0.01, .alpha = 0.5, .t0 = 2, .weight_decay = 0.1},
      {0.8789999981969594, -1.547999993264675, 2.7969999969750643, 0.7714847421319675, -1.1915501735351137,
       2.606478233422068, 0.6759454282485388, -0.9104140852319917, 2.4276617899947133, 0.591042746433656,
       -0.6886491169964449, 2.259825990065306, 0.5155877582238572, -0.5136937086001001, 2.102291353817681},
      "asgd averaged");
  // The average ax (averaging starts after t0 = 2 steps), eta and mu, as PyTorch's state.
  Tensor p = start();
  optim::ASGD opt(std::vector<Tensor>{p}, {.lr = 0.1, .lambd = 0.01, .alpha = 0.5, .t0 = 2, .weight_decay = 0.1});
  trajectory(opt, p);
  auto sd = opt.state_dict();
  EXPECT_TRUE(allclose(sd.at("state.0.ax"),
                       tensor({0.5533152523287566, -0.6011714127982726, 2.1810586719414937}, dtype(kFloat64)), 1e-12,
                       1e-14));
  EXPECT_DOUBLE_EQ(sd.at("state.0.eta").item<double>(), 0.09975093603134155);
  EXPECT_DOUBLE_EQ(sd.at("state.0.mu").item<double>(), 0.3333333432674408);
}

TEST(Optim, Adadelta) {
  // Step 1: v = 0.1 g0^2, delta = sqrt(1e-6) / sqrt(v + 1e-6) g0 ~ 1e-3 / sqrt(0.1) sign(g0),
  // so p1 = p0 - 0.00316... sign(g0).
  check<optim::Adadelta>(
      optim::AdadeltaOptions{.lr = 1.0},
      {0.9968377354070137, -1.9968377231949632, 2.996837727810886, 0.9935977488595691, -1.9935955587165286,
       2.993594735578741, 0.9903075663513657, -1.990300174898682, 2.990297362031737, 0.9869807909663872,
       -1.9869646950644178, 2.9869585455575485, 0.9836255181453292, -1.9835969000108555, 2.9835859449552227},
      "adadelta");
  check<optim::Adadelta>(
      optim::AdadeltaOptions{.lr = 0.5, .rho = 0.5, .weight_decay = 0.1},
      {0.9992928937098593, -1.9992928932537324, 2.99929289339559, 0.9984765743174926, -1.998476486559533,
       2.9984764548000906, 0.9975773035565533, -1.9975769872326918, 2.9975768713860123, 0.9966071268090287,
       -1.9966064015918412, 2.996606135031597, 0.9955730676445003, -1.9955717220790867, 2.9955712266839614},
      "adadelta rho");
}

TEST(Optim, Adamax) {
  // Step 1: m = 0.1 g0, u = |g0| + eps; 0.1 / (1 - 0.9) * m / u = 0.1 sign(g0) (up to 1e-9).
  check<optim::Adamax>(
      optim::AdamaxOptions{.lr = 0.1},
      {0.9000000009090909, -1.900000000232558, 2.900000000588235, 0.8046893801055993, -1.8023503312008553,
       2.8014494382119817, 0.714079221333554, -1.707096840118726, 2.7043870646814208, 0.6281678912095433,
       -1.6142814674814714, 2.6088499702472787, 0.5469408490784565, -1.5239420169504554, 2.5148734349360917},
      "adamax");
  check<optim::Adamax>(
      optim::AdamaxOptions{.lr = 0.1, .betas = {0.8, 0.5}, .weight_decay = 0.1},
      {0.9000000008333333, -1.9000000002222222, 2.9000000005, 0.7955147826689438, -1.797824398289863,
       2.7986254305828995, 0.6855993338586214, -1.6933656627081437, 2.6958777218018812, 0.5687546872366261,
       -1.5864879265963245, 2.5917563008816575, 0.44238124743871443, -1.4770157859518283, 2.4862571476064432},
      "adamax weight_decay");
}

TEST(Optim, NAdam) {
  // Step 1: mu_1 = 0.9 (1 - 0.96^0.004 / 2), P_1 = mu_1; d = |g0| + eps, so both terms move by
  // sign(g0): 0.1 ((1 - mu_1) / (1 - mu_1) * 1 + mu_2 / (1 - mu_1 mu_2) * 0.1) = 0.10564...
  check<optim::NAdam>(
      optim::NAdamOptions{.lr = 0.1},
      {0.8943548231248719, -1.8943548224101476, 2.8943548227859033, 0.8195828798014559, -1.817759011578878,
       2.8170914218950363, 0.7517429974624716, -1.7471624720937997, 2.745499446967408, 0.6859065942884491,
       -1.677562116255944, 2.674559997358317, 0.6207599083677273, -1.6074676190552284, 2.6027307583088795},
      "nadam");
  // NAdamW: decoupled decay, a fast momentum schedule (psi 0.5) and beta2 0.9.
  check<optim::NAdam>(
      optim::NAdamOptions{
          .lr = 0.1, .betas = {0.9, 0.9}, .weight_decay = 0.1, .momentum_decay = 0.5, .decoupled_weight_decay = true},
      {0.8840393186625141, -1.8740393179456551, 2.864039318322533, 0.8010465970329135, -1.7794240294912722,
       2.7588762386428973, 0.7262569006290812, -1.6923602222858545, 2.661091502506904, 0.6543969848689541,
       -1.6075693400268494, 2.565417636618868, 0.5838703240255363, -1.5233492705941287, 2.470128855643103},
      "nadamw");
}

TEST(Optim, RAdam) {
  // With beta2 = 0.999, rho_t < 5 for the first steps: plain bias-corrected momentum, step 1 is
  // p0 - 0.1 g0 (as SGD's).
  check<optim::RAdam>(
      optim::RAdamOptions{.lr = 0.1},
      {0.89, -1.57, 2.83, 0.7857894736842105, -1.1852631578947368, 2.6644736842105265, 0.687347057681103,
       -0.8439522237327635, 2.503487084870849, 0.5946352930984659, -0.5440837116165653, 2.347098405012455,
       0.5076006146120877, -0.28354312062387704, 2.1953576603956355},
      "radam");
  check<optim::RAdam>(optim::RAdamOptions{.lr = 0.1, .betas = {0.9, 0.5}, .weight_decay = 0.1},
                      {0.88, -1.55, 2.8, 0.7669473684210526, -1.1497368421052632, 2.606315789473684, 0.6607908331714896,
                       -0.7970081569236744, 2.419017284909691, 0.5614588235400421, -0.48945451455325684,
                       2.2381617775743727, 0.4688596260602008, -0.2245782657298182, 2.0637934868347068},
                      "radam weight_decay");
  // beta2 = 0.9: rectified from step 6 (rho_6 = 5.39), with decoupled weight decay.
  check<optim::RAdam>(
      optim::RAdamOptions{.lr = 0.1, .betas = {0.9, 0.9}, .weight_decay = 0.1, .decoupled_weight_decay = true},
      {0.88,
       -1.55,
       2.8,
       0.7675157894736842,
       -1.1518684210526315,
       2.6072631578947365,
       0.6624046245872984,
       -0.8028317721887743,
       2.421757626723635,
       0.5645078585067754,
       -0.5000164029323626,
       2.243441555707505,
       0.47365143440855706,
       -0.2404684418306895,
       2.07226295102619,
       0.44400885352899944,
       -0.215629804774417,
       2.0261727352805075,
       0.40754753490848034,
       -0.18558420686429752,
       1.9731303435059557,
       0.3656312492191451,
       -0.15167068581086718,
       1.9144743358108995},
      "radam rectified", 8);
  EXPECT_THROW(optim::RAdam(std::vector<Tensor>{start()}, {.betas = {0.9, 1.0}}), ValueError);
  EXPECT_THROW(optim::NAdam(std::vector<Tensor>{start()}, {.momentum_decay = -1}), ValueError);
  EXPECT_THROW(optim::Adamax(std::vector<Tensor>{start()}, {.lr = -1}), ValueError);
}

TEST(Optim, ParameterGroupsHaveTheirOwnOptions) {
  Tensor a = start(), b = start();
  optim::SGD opt(
      {{.params = {a}}, {.params = {b}, .options = optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}}},
      {.lr = 0.1});
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_DOUBLE_EQ(opt.get_option(1, "momentum"), 0.9);
  EXPECT_DOUBLE_EQ(opt.get_option(0, "momentum"), 0.0);
  for (int s = 0; s < 5; ++s) {
    opt.zero_grad();
    (quadratic(a) + quadratic(b)).backward();
    opt.step();
  }
  // a follows plain SGD, b Nesterov SGD (the last steps of the trajectories above).
  EXPECT_NEAR(a[2].item<double>(), 2.2308551875, 1e-12);
  EXPECT_NEAR(b[2].item<double>(), 0.6742038372231248, 1e-12);
  // add_param_group with the defaults.
  Tensor c = start();
  opt.add_param_group({.params = {c}});
  EXPECT_DOUBLE_EQ(opt.lr(2), 0.1);
  EXPECT_THROW(opt.add_param_group({.params = {a}}), ValueError);  // already in group 0
  EXPECT_EQ(opt.num_param_groups(), 3u);
  EXPECT_EQ(opt.all_params().size(), 3u);
}

TEST(Optim, OptionsAreValidatedAndReachableByName) {
  Tensor p = start();
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{p}, {.lr = -1}), ValueError);
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{p}, {.lr = 0.1, .nesterov = true}), ValueError);
  EXPECT_THROW(optim::Adam(std::vector<Tensor>{p}, {.betas = {1.0, 0.9}}), ValueError);
  EXPECT_THROW(optim::RMSprop(std::vector<Tensor>{p}, {.eps = -1}), ValueError);
  EXPECT_THROW(optim::Adadelta(std::vector<Tensor>{p}, {.rho = 1.5}), ValueError);
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{}, {.lr = 0.1}), ValueError);
  Tensor nonleaf = start() * 2;
  EXPECT_THROW(optim::SGD(std::vector<Tensor>{nonleaf}, {.lr = 0.1}), ValueError);
  EXPECT_THROW(optim::SGD(std::vector<Tensor>({p, p}), {.lr = 0.1}), ValueError);

  optim::Adam opt(std::vector<Tensor>{p}, {.lr = 0.01});
  EXPECT_TRUE(opt.has_option("beta1"));
  EXPECT_FALSE(opt.has_option("momentum"));
  opt.set_option(0, "beta1", 0.5);
  EXPECT_DOUBLE_EQ(opt.options().betas.first, 0.5);
  opt.set_lr(0.2);
  EXPECT_DOUBLE_EQ(opt.options(0).lr, 0.2);
  opt.set_option(0, "amsgrad", 1);
  EXPECT_TRUE(opt.options().amsgrad);
  // An invalid value is refused and the old one kept.
  EXPECT_THROW(opt.set_option(0, "beta2", 2.0), ValueError);
  EXPECT_DOUBLE_EQ(opt.options().betas.second, 0.999);
  try {
    opt.get_option(0, "momentum");
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Adam: unknown option 'momentum' (it has: lr, beta1, beta2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(opt.get_option(3, "lr"), IndexError);
}

TEST(Optim, ZeroGradAndParametersWithoutGradients) {
  Tensor a = start(), b = start();
  optim::Adam opt(std::vector<Tensor>{a, b}, {.lr = 0.1});
  quadratic(a).backward();  // b gets no gradient
  opt.step();
  EXPECT_TRUE(b.equal(start()));  // untouched
  nn::StateDict sd = opt.state_dict();
  EXPECT_TRUE(sd.contains("state.0.exp_avg"));
  EXPECT_FALSE(sd.contains("state.1.exp_avg"));  // no state for a parameter never stepped
  opt.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(a.grad().equal(zeros({3}, kFloat64)));
  opt.zero_grad();
  EXPECT_FALSE(a.grad().defined());
}

TEST(Optim, StepWithClosure) {
  Tensor p = start();
  optim::SGD opt(std::vector<Tensor>{p}, {.lr = 0.1});
  Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = quadratic(p);
    l.backward();
    return l;
  });
  // f(p0) = 0.5 (1 + 8 + 4.5) + (0.1 + 0.6 + 0.6) = 8.05
  EXPECT_NEAR(loss.item<double>(), 8.05, 1e-12);
  EXPECT_NEAR(p[0].item<double>(), 0.89, 1e-15);
}

TEST(Optim, StateDictRoundTripContinuesExactly) {
  // 5 steps in one go equal 3 steps, a state dict, a fresh optimizer, and 2 more steps.
  auto make = [](Tensor p) {
    return std::make_unique<optim::Adam>(
        std::vector<optim::Adam::ParamGroup>{
            {.params = {p}, .options = optim::AdamOptions{.lr = 0.1, .amsgrad = true}}},
        optim::AdamOptions{});
  };
  Tensor p1 = start();
  auto o1 = make(p1);
  auto full_run = trajectory(*o1, p1, 5);
  Tensor p2 = start();
  auto o2 = make(p2);
  auto first = trajectory(*o2, p2, 3);
  nn::StateDict sd = o2->state_dict();
  EXPECT_EQ(sd.keys(),
            (std::vector<std::string>{"param_groups.0.params", "param_groups.0.lr", "param_groups.0.beta1",
                                      "param_groups.0.beta2", "param_groups.0.eps", "param_groups.0.weight_decay",
                                      "param_groups.0.amsgrad", "param_groups.0.maximize", "state.0.step",
                                      "state.0.exp_avg", "state.0.exp_avg_sq", "state.0.max_exp_avg_sq"}));
  EXPECT_EQ(sd["state.0.step"].item<int64_t>(), 3);
  // Through a safetensors buffer, as a checkpoint would.
  auto bytes = safetensors::serialize(sd);
  nn::StateDict loaded = safetensors::deserialize(bytes.data(), bytes.size()).tensors;
  Tensor p3 = p2.detach().clone().requires_grad_();
  optim::Adam o3(std::vector<Tensor>{p3}, {.lr = 0.5});  // other options: the state dict's win
  o3.load_state_dict(loaded);
  EXPECT_DOUBLE_EQ(o3.lr(), 0.1);
  EXPECT_TRUE(o3.options().amsgrad);
  auto rest = trajectory(o3, p3, 2);
  std::vector<double> resumed = first;
  resumed.insert(resumed.end(), rest.begin(), rest.end());
  EXPECT_EQ(resumed, full_run);  // bitwise
  // The loaded state is a private copy.
  EXPECT_NE(o3.state_dict()["state.0.exp_avg"].data_ptr(), loaded["state.0.exp_avg"].data_ptr());
}

// The same for the Adam variants, whose state holds more than tensors (NAdam's mu_product).
template <class Opt, class Options>
void expect_resume_is_exact(const Options& o) {
  Tensor p1 = start(), p2 = start();
  Opt o1(std::vector<Tensor>{p1}, o), o2(std::vector<Tensor>{p2}, o);
  auto full_run = trajectory(o1, p1, 7);
  auto first = trajectory(o2, p2, 4);
  auto bytes = safetensors::serialize(o2.state_dict());
  Tensor p3 = p2.detach().clone().requires_grad_();
  Opt o3(std::vector<Tensor>{p3}, o);
  o3.load_state_dict(safetensors::deserialize(bytes.data(), bytes.size()).tensors);
  auto rest = trajectory(o3, p3, 3);
  first.insert(first.end(), rest.begin(), rest.end());
  EXPECT_EQ(first, full_run) << o3.name();  // bitwise
}

TEST(Optim, AdamVariantsResumeExactly) {
  expect_resume_is_exact<optim::Adamax>(optim::AdamaxOptions{.lr = 0.1});
  expect_resume_is_exact<optim::NAdam>(optim::NAdamOptions{.lr = 0.1, .momentum_decay = 0.5});
  expect_resume_is_exact<optim::RAdam>(optim::RAdamOptions{.lr = 0.1, .betas = {0.9, 0.9}});
}

TEST(Optim, RpropAndASGDOptionsAndResume) {
  EXPECT_THROW(optim::Rprop(std::vector<Tensor>{start()}, {.etas = {1.5, 1.2}}), ValueError);
  EXPECT_THROW(optim::Rprop(std::vector<Tensor>{start()}, {.step_sizes = {1.0, 0.5}}), ValueError);
  EXPECT_THROW(optim::Rprop(std::vector<Tensor>{start()}, {.lr = -1}), ValueError);
  EXPECT_THROW(optim::ASGD(std::vector<Tensor>{start()}, {.weight_decay = -1}), ValueError);
  expect_resume_is_exact<optim::Rprop>(optim::RpropOptions{.lr = 0.1});
  expect_resume_is_exact<optim::ASGD>(optim::ASGDOptions{.lr = 0.1, .t0 = 2});
}

TEST(Optim, LoadStateDictErrors) {
  Tensor a = start(), b = start();
  optim::SGD opt(std::vector<Tensor>{a, b}, {.lr = 0.1, .momentum = 0.9});
  quadratic(a).backward();
  quadratic(b).backward();
  opt.step();
  nn::StateDict sd = opt.state_dict();
  Tensor c = start();
  optim::SGD one(std::vector<Tensor>{c}, {.lr = 0.1, .momentum = 0.9});
  EXPECT_THROW(one.load_state_dict(sd), ValueError);  // 2 parameters vs 1
  optim::SGD two_groups({{.params = {a}}, {.params = {b}}}, {.lr = 0.1});
  EXPECT_THROW(two_groups.load_state_dict(sd), ValueError);  // 1 group vs 2
  optim::SGD same(std::vector<Tensor>{start(), start()}, {.lr = 0.2});
  nn::StateDict bad = sd;
  bad["state.1.momentum_buffer"] = zeros({4}, kFloat64);
  EXPECT_THROW(same.load_state_dict(bad), ShapeError);
  nn::StateDict extra = sd;
  extra.insert("state.0.bogus", zeros({3}, kFloat64));
  try {
    same.load_state_dict(extra);
    FAIL();
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("unexpected key(s): 'state.0.bogus'"), std::string::npos) << e.what();
  }
  nn::StateDict missing = sd;
  missing.erase("param_groups.0.momentum");
  EXPECT_THROW(same.load_state_dict(missing), ValueError);
  // The failed loads changed nothing.
  EXPECT_DOUBLE_EQ(same.lr(), 0.2);
  EXPECT_FALSE(same.state_dict().contains("state.0.momentum_buffer"));
  same.load_state_dict(sd);
  EXPECT_DOUBLE_EQ(same.lr(), 0.1);
  EXPECT_TRUE(same.state_dict()["state.1.momentum_buffer"].equal(sd["state.1.momentum_buffer"]));
}

TEST(Optim, FusedStepsTakeContiguousTensorsAndDeclineOthersWritingNothing) {
  // The CPU's fused updates take contiguous float tensors in one pass (the trajectories above check
  // their values); anything else they decline untouched, and the optimizer composes the update.
  const optim::FusedSteps& cpu = optim::fused_steps(Device::cpu());
  auto fresh = [] { return full({4}, 2.0, kFloat32); };
  Tensor p = fresh(), g = full({4}, 1.0, kFloat32), a = fresh(), b = fresh(), c = fresh();
  Tensor strided = full({8}, 2.0, kFloat32).slice(0, 0, 8, 2), wrong = fresh().to(kFloat64);
  const optim::AdamStep adam{0.1, 0.9, 0.999, 1e-8, 0, 0.1, 1, false, false, true};
  const optim::RmspropStep rms{0.1, 0.9, 1e-8, 0, 0.9, true, false};
  const optim::AdagradStep ada{0.1, 1e-10, 0, false};
  const optim::AdadeltaStep delta{1, 0.9, 1e-6, 0, false};
  EXPECT_FALSE(cpu.adam_step(p, g, a, b, strided, adam));  // amsgrad reads the third state tensor
  EXPECT_FALSE(cpu.adam_step(p, g, a, b, Tensor(), adam));
  EXPECT_FALSE(cpu.rmsprop_step(p, g, a, wrong, c, rms));
  EXPECT_FALSE(cpu.rmsprop_step(strided, g, a, b, c, rms));
  EXPECT_FALSE(cpu.adagrad_step(p, wrong, a, ada));
  EXPECT_FALSE(cpu.adadelta_step(p, g, a, strided, delta));
  for (const Tensor& t : {p, a, b, c}) EXPECT_TRUE(equal(t, fresh()));
  // Variants that do not read a state tensor do not look at it.
  EXPECT_TRUE(cpu.adam_step(p, g, a, b, Tensor(), {0.1, 0.9, 0.999, 1e-8, 0, 0.1, 1, false, false, false}));
  EXPECT_TRUE(cpu.rmsprop_step(p, g, a, Tensor(), Tensor(), {0.1, 0.9, 1e-8, 0, 0, false, false}));
  EXPECT_TRUE(cpu.adagrad_step(p, g, a, ada));
  EXPECT_TRUE(cpu.adadelta_step(p, g, a, b, delta));
}

TEST(Optim, StateFollowsTheParameterDtype) {
  Tensor p = start();
  optim::Adam opt(std::vector<Tensor>{p}, {.lr = 0.1});
  quadratic(p).backward();
  opt.step();
  nn::StateDict sd = opt.state_dict();
  Tensor q = start(kFloat32);
  optim::Adam o32(std::vector<Tensor>{q}, {.lr = 0.1});
  o32.load_state_dict(sd);
  EXPECT_EQ(o32.state_dict()["state.0.exp_avg"].dtype(), kFloat32);
  EXPECT_EQ(o32.state_dict()["state.0.step"].dtype(), kInt64);
}

// On float16/bfloat16 parameters the CPU's fused updates keep the state in the parameter's dtype (as
// PyTorch does) and compute in float32: each result is the float32 update of the same values rounded
// once, bit for bit, over several threads' chunks and a block tail.
TEST(Optim, FusedStepsOn16BitParametersAreTheFloat32UpdateRoundedOnce) {
  const optim::FusedSteps& cpu = optim::fused_steps(Device::cpu());
  const int64_t n = 70001;
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    // The 16-bit tensors and their float32 twins (same values); the state tensors are positive.
    auto make = [&](bool positive) {
      Tensor t = randn({n});
      return (positive ? t.abs() + 0.01 : t).to(dt);
    };
    std::vector<Tensor> lo = {make(false), make(false), make(false), make(true), make(true)};
    std::vector<Tensor> hi;
    for (const Tensor& t : lo) hi.push_back(t.to(kFloat32));
    auto check = [&](const char* what, bool did16, bool did32, std::initializer_list<int> written) {
      ASSERT_TRUE(did16 && did32) << what;
      for (int i : written) EXPECT_TRUE(equal(lo[i], hi[i].to(dt))) << what << " tensor " << i;
      for (size_t i = 0; i < lo.size(); ++i) hi[i] = lo[i].to(kFloat32);  // the next step starts level
    };
    // p, g, then state: momentum/exp_avg (any sign), exp_avg_sq / square_avg / sum (positive).
    const optim::SgdStep sgd{0.1, 0.9, 0.1, 0.01, true, false, false};
    check("sgd", cpu.sgd_step(lo[0], lo[1], lo[2], sgd), cpu.sgd_step(hi[0], hi[1], hi[2], sgd), {0, 2});
    const optim::AdamStep adamw{0.01, 0.9, 0.999, 1e-8, 0.01, 0.01, 0.05, true, false, true};
    check("adamw amsgrad", cpu.adam_step(lo[0], lo[1], lo[2], lo[3], lo[4], adamw),
          cpu.adam_step(hi[0], hi[1], hi[2], hi[3], hi[4], adamw), {0, 2, 3, 4});
    const optim::RmspropStep rms{0.01, 0.99, 1e-8, 0.001, 0.9, false, false};
    check("rmsprop", cpu.rmsprop_step(lo[0], lo[1], lo[3], Tensor(), lo[2], rms),
          cpu.rmsprop_step(hi[0], hi[1], hi[3], Tensor(), hi[2], rms), {0, 2, 3});
    const optim::AdagradStep ada{0.1, 1e-10, 0, true};
    check("adagrad", cpu.adagrad_step(lo[0], lo[1], lo[3], ada), cpu.adagrad_step(hi[0], hi[1], hi[3], ada), {0, 3});
    const optim::AdadeltaStep delta{1, 0.9, 1e-6, 0.01, false};
    check("adadelta", cpu.adadelta_step(lo[0], lo[1], lo[3], lo[4], delta),
          cpu.adadelta_step(hi[0], hi[1], hi[3], hi[4], delta), {0, 3, 4});
    // Mixed dtypes are still declined.
    EXPECT_FALSE(cpu.adagrad_step(lo[0], hi[1], lo[3], ada));
  }
  // Through the optimizer: a bfloat16 model's Adam state is bfloat16 and the loss goes down.
  manual_seed(3);
  nn::Linear lin(8, 1);
  lin.to(kBFloat16);
  optim::Adam opt(lin.parameters(), {.lr = 0.05});
  Tensor x = randn({64, 8}), y = x.matmul(randn({8, 1}));
  double first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    opt.zero_grad();
    Tensor loss = (lin.forward(x.to(kBFloat16)).to(kFloat32) - y).pow(2).mean();
    loss.backward();
    opt.step();
    (i == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.1 * first);
  EXPECT_EQ(opt.state_dict()["state.0.exp_avg"].dtype(), kBFloat16);
}
