// The DiT, seeded sampling, checkpoints and one step of each kind of training.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "models/checkpoint.h"
#include "models/dit.h"
#include "models/draft.h"
#include "models/evaluate.h"
#include "models/flow.h"
#include "models/grpo.h"
#include "models/nft.h"
#include "models/sampler.h"
#include "models/scene/detect.h"
#include "models/scene/geometry.h"
#include "models/scene/prompt.h"
#include "models/scene/render.h"
#include "tools/common/device.h"

using namespace spotlight;
using namespace spotlight::models;

namespace {

// A small model so that tests run in seconds; 16x16 is the smallest size the
// scene renderer draws.
DiTConfig test_config(int64_t pixel_head = 0) {
  DiTConfig c;
  c.pixel_head = pixel_head;
  c.name = "test";
  c.image_size = 16;
  c.patch = 4;
  c.dim = 32;
  c.depth = 2;
  c.heads = 2;
  c.text_depth = 1;
  return c;
}

// adaLN-Zero starts every block as the identity and the output at zero; give
// the zero-initialised layers some weight so that every path carries signal.
void perturb(DiT& m) {
  torch::NoGradGuard ng;
  for (auto& p : m->named_parameters())
    if (p.key().find("mod") != std::string::npos ||
        p.key().find("final_out") != std::string::npos ||
        p.key().find("pixel_out") != std::string::npos)
      p.value().normal_(0.0, 0.05);
}

DiT perturbed_model(uint64_t seed, int64_t pixel_head = 0) {
  torch::manual_seed(seed);
  DiT m(test_config(pixel_head));
  perturb(m);
  return m;
}

std::vector<scene::Prompt> some_prompts(int n, uint64_t seed = 3) {
  scene::PromptGenerator g(seed);
  std::vector<scene::Prompt> out;
  for (int i = 0; i < n; ++i) out.push_back(g.next());
  return out;
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))).string();
}

}  // namespace

TEST(DiT, NamedConfigurationsHaveTheAdvertisedSizes) {
  DiT tiny(dit_config("tiny"));
  EXPECT_GT(tiny->parameter_count(), 700'000);
  EXPECT_LT(tiny->parameter_count(), 1'500'000);
  EXPECT_EQ(tiny->config().image_size, 32);
  DiT base(dit_config("base"));
  EXPECT_GT(base->parameter_count(), 80'000'000);
  EXPECT_LT(base->parameter_count(), 130'000'000);
  EXPECT_THROW(dit_config("huge"), std::invalid_argument);
  auto bad = test_config();
  bad.heads = 3;  // 32 is not a multiple of 3
  EXPECT_THROW(DiT{bad}, std::invalid_argument);
}

TEST(DiT, PredictsAVelocityOfTheImageShapeAndStartsAtZero) {
  DiT m(test_config());
  auto x = torch::randn({3, 3, 16, 16});
  auto tokens = encode_prompts(some_prompts(3), 12);
  auto v = m->forward(x, torch::full({3}, 0.5), tokens);
  EXPECT_EQ(v.sizes(), x.sizes());
  EXPECT_EQ(v.abs().max().item<double>(), 0.0) << "adaLN-Zero: an untrained DiT predicts 0";
  auto p = perturbed_model(1);
  auto v1 = p->forward(x, torch::full({3}, 0.5), tokens);
  EXPECT_GT(v1.abs().max().item<double>(), 0.0);
  // The prompt conditions the output.
  auto other = encode_prompts(some_prompts(3, 99), 12);
  EXPECT_FALSE(torch::equal(v1, p->forward(x, torch::full({3}, 0.5), other)));
  EXPECT_THROW(m->forward(torch::randn({3, 3, 8, 8}), torch::full({3}, 0.5), tokens), c10::Error);
}

TEST(DiT, AGrownPixelHeadStartsAsTheIdentityAndThenSeesAcrossPatchBorders) {
  auto plain = perturbed_model(4);
  DiT grown(test_config(8));
  auto fresh = copy_matching_weights(plain, grown);
  EXPECT_EQ(fresh.size(), 6u) << "pixel_feat, pixel_in and pixel_out, weights and biases";
  for (const auto& name : fresh) EXPECT_EQ(name.rfind("pixel_", 0), 0u) << name;
  torch::NoGradGuard ng;
  auto x = torch::randn({2, 3, 16, 16});
  auto s = torch::full({2}, 0.4);
  auto tokens = encode_prompts(some_prompts(2), 12);
  auto v = plain->forward(x, s, tokens);
  EXPECT_TRUE(torch::equal(v, grown->forward(x, s, tokens)))
      << "a model that gains a head must draw as before";
  // Trained, the head moves a pixel by its neighbours across the patch
  // border. With the blocks left as identities (adaLN-Zero), a patch's output
  // comes from its own token alone; a change to pixel (5, 3) of x, in the
  // first column of 4x4 patches, then reaches pixel (5, 4), in the second,
  // only through the head.
  auto local = [&](int64_t pixel_head) {
    torch::manual_seed(5);
    DiT m(test_config(pixel_head));
    for (auto& p : m->named_parameters())
      if (p.key().rfind("final_", 0) == 0 || p.key().rfind("pixel_out", 0) == 0)
        p.value().normal_(0.0, 0.05);
    return m;
  };
  auto x2 = x.clone();
  x2.index_put_({0, 0, 5, 3}, x2.index({0, 0, 5, 3}) + 1.0);
  auto reach = [&](DiT m) {
    auto d = (m->forward(x2, s, tokens) - m->forward(x, s, tokens)).abs();
    return d.index({0, torch::indexing::Slice(), 5, 4}).max().item<double>();
  };
  EXPECT_EQ(reach(local(0)), 0.0) << "without the head the next patch does not see the pixel";
  EXPECT_GT(reach(local(8)), 0.0) << "the head does not see across the patch border";
  DiT other(test_config(4));  // another head width: its weights cannot carry over
  EXPECT_THROW(copy_matching_weights(grown, other), CheckpointError);
}

TEST(SeedNoise, DependsOnlyOnTheSeed) {
  auto a = seed_noise({7, 8, 9}, 3, {3, 4, 4});
  auto b = seed_noise({9, 7}, 3, {3, 4, 4});
  EXPECT_TRUE(torch::equal(a[0], b[1]));
  EXPECT_TRUE(torch::equal(a[2], b[0]));
  EXPECT_FALSE(torch::equal(a[0], a[1]));
  EXPECT_FALSE(torch::equal(seed_noise({7}, 3, {3, 4, 4})[0], seed_noise({7}, 4, {3, 4, 4})[0]));
}

class SeededSampling : public ::testing::TestWithParam<int64_t> {};

// With and without the pixel head, whose convolutions must keep the promise too.
INSTANTIATE_TEST_SUITE_P(Sampler, SeededSampling, ::testing::Values(0, 8),
                         [](const auto& info) { return "PixelHead" + std::to_string(info.param); });

TEST_P(SeededSampling, IsBitIdenticalAcrossRunsBatchesAndThreads) {
  auto model = perturbed_model(2, GetParam());
  auto prompts = some_prompts(5);
  std::vector<uint64_t> seeds{11, 12, 13, 14, 15};
  SamplerOptions opts;
  opts.steps = 6;
  // The tools' --threads: LibTorch's pool and OpenBLAS's, whose matrix products
  // must not change a sample either.
  auto run = [&](const std::vector<int>& rows, int threads) {
    spotlight::tools::set_cpu_threads(threads);
    std::vector<scene::Prompt> p;
    std::vector<uint64_t> s;
    for (int r : rows) {
      p.push_back(prompts[r]);
      s.push_back(seeds[r]);
    }
    return sample(model, encode_prompts(p, 12), s, opts).images;
  };
  auto all = run({0, 1, 2, 3, 4}, 2);
  EXPECT_TRUE(torch::equal(all, run({0, 1, 2, 3, 4}, 2))) << "two runs differ";
  auto alone = run({3}, 2);
  EXPECT_TRUE(torch::equal(all[3], alone[0])) << "a sample depends on its batch";
  auto shuffled = run({4, 3, 0}, 1);
  EXPECT_TRUE(torch::equal(all[3], shuffled[1])) << "a sample depends on batch order or threads";
  EXPECT_TRUE(torch::equal(all[0], shuffled[2]));
  EXPECT_TRUE(torch::equal(all, run({0, 1, 2, 3, 4}, 1))) << "a sample depends on the thread count";
  spotlight::tools::set_cpu_threads(2);
  EXPECT_FALSE(torch::equal(all[0], all[1]));
}

TEST(Sampler, ThreadsOptionSetsOpenBlasToo) {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (!get) GTEST_SKIP() << "this LibTorch does not use OpenBLAS";
  spotlight::tools::set_cpu_threads(1);
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_EQ(get(), 1) << "a --threads 1 job would still run its matrix products on every core";
  spotlight::tools::set_cpu_threads(2);
  EXPECT_EQ(at::get_num_threads(), 2);
  EXPECT_EQ(get(), 2);
}

TEST(Sampler, RecordsTheTrajectoryAndOnPolicyRatiosAreExactlyOne) {
  auto model = perturbed_model(3);
  auto prompts = some_prompts(4);
  auto tokens = encode_prompts(prompts, 12);
  // Without and with classifier-free guidance: training re-runs the same
  // velocity recipe (the null branch detached), so the ratio is exactly 1.
  for (double guidance : {1.0, 3.0}) {
    SamplerOptions opts;
    opts.steps = 5;
    opts.record = true;
    opts.guidance = guidance;
    auto r = sample(model, tokens, {1, 2, 3, 4}, opts);
    ASSERT_EQ(r.latents.size(), 6u);
    EXPECT_EQ(r.sde_steps, (std::vector<int>{0, 1, 2, 3}));  // no noise on the terminal step
    ASSERT_EQ(r.log_probs.sizes(), torch::IntArrayRef({4, 4}));
    EXPECT_TRUE(torch::equal(r.images, r.latents.back()));
    auto adv = torch::tensor({1.0f, -1.0f, 0.5f, -0.5f});
    for (size_t k = 0; k < r.sde_steps.size(); ++k) {
      GrpoStepStats st;
      grpo_step_loss(model, nullptr, tokens, r, k, adv, opts, {}, &st);
      EXPECT_LT(st.max_ratio_deviation, 1e-6) << "guidance " << guidance << ", step " << k;
    }
  }
}

TEST(Sampler, GuidanceMixesThePromptAndNullBranches) {
  auto model = perturbed_model(12);
  auto tokens = encode_prompts(some_prompts(3), 12);
  auto x = torch::randn({3, 3, 16, 16});
  torch::NoGradGuard ng;
  auto v_prompt = model->forward(x, torch::full({3}, 0.6), tokens);
  auto v_null = model->forward(x, torch::full({3}, 0.6), torch::zeros_like(tokens));
  EXPECT_FALSE(torch::equal(v_prompt, v_null)) << "the prompt must change the velocity";
  EXPECT_TRUE(torch::equal(guided_velocity(model, x, 0.6, tokens, 1.0), v_prompt)) << "guidance 1 is the prompt alone";
  // One pass over [x; x] gives each branch the bits of its own pass.
  EXPECT_TRUE(torch::equal(guided_velocity(model, x, 0.6, tokens, 4.0), v_null + 4.0 * (v_prompt - v_null)));
  EXPECT_TRUE(torch::equal(guided_velocity(model, x, 0.6, tokens, 0.0), v_null)) << "guidance 0 is unconditional";

  // Guided seeded sampling keeps its promise: a sample's bits do not depend on its batch.
  SamplerOptions opts;
  opts.steps = 4;
  opts.guidance = 2.5;
  auto prompts = some_prompts(3);
  auto all = sample(model, encode_prompts(prompts, 12), {7, 8, 9}, opts).images;
  auto alone = sample(model, encode_prompts({prompts[1]}, 12), {8}, opts).images;
  EXPECT_TRUE(torch::equal(all[1], alone[0]));
  opts.guidance = -1;
  EXPECT_THROW(opts.validate(), std::invalid_argument);
}

TEST(Training, AFlowMatchingStepLowersTheLossOnAFixedBatch) {
  torch::manual_seed(5);
  DiT model(test_config());
  auto prompts = some_prompts(16);
  std::vector<uint64_t> seeds(16);
  for (size_t i = 0; i < seeds.size(); ++i) seeds[i] = 100 + i;
  auto x0 = render_batch(prompts, seeds, 16);
  auto tokens = encode_prompts(prompts, 12);
  auto eps = torch::randn(x0.sizes());
  auto s = torch::rand({16});
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto loss_of = [&] { return flow_matching_loss(model->forward(interpolate(x0, eps, s), s, tokens), x0, eps); };
  const double before = loss_of().item<double>();
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    loss_of().backward();
    opt.step();
  }
  EXPECT_LT(loss_of().item<double>(), before);
}

TEST(Training, AGrpoStepRaisesPositiveAndLowersNegativeAdvantageLogProbs) {
  auto model = perturbed_model(4);
  auto prompts = some_prompts(4, 17);
  auto tokens = encode_prompts(prompts, 12);
  SamplerOptions opts;
  opts.steps = 4;
  opts.record = true;
  auto r = sample(model, tokens, {21, 22, 23, 24}, opts);
  auto adv = torch::tensor({1.0f, -1.0f, 1.0f, -1.0f});
  auto logp_now = [&] {
    torch::NoGradGuard ng;
    std::vector<torch::Tensor> lps;
    for (int i : r.sde_steps) {
      auto st = sde_mean(r.latents[i], model->forward(r.latents[i], torch::full({4}, r.sigmas[i]), tokens),
                         r.sigmas[i], r.sigmas[i + 1], r.sigmas[1], opts.noise_level);
      lps.push_back(step_log_prob(r.latents[i + 1], st.mean, st.std_dt));
    }
    return torch::stack(lps, 1).sum(1);  // summed over trained steps, per sample
  };
  auto before = logp_now();
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(1e-2));
  opt.zero_grad();
  for (size_t k = 0; k < r.sde_steps.size(); ++k) grpo_step_loss(model, nullptr, tokens, r, k, adv, opts, {}).backward();
  opt.step();
  auto delta = logp_now() - before;
  for (int b = 0; b < 4; ++b) {
    if (adv[b].item<float>() > 0) EXPECT_GT(delta[b].item<double>(), 0) << "sample " << b;
    else EXPECT_LT(delta[b].item<double>(), 0) << "sample " << b;
  }
}

TEST(Training, TheKlTermPullsTowardsTheReference) {
  auto model = perturbed_model(6);
  auto ref = perturbed_model(7);  // a different policy
  auto tokens = encode_prompts(some_prompts(2), 12);
  SamplerOptions opts;
  opts.steps = 3;
  opts.record = true;
  auto r = sample(model, tokens, {1, 2}, opts);
  GrpoOptions with_kl;
  with_kl.beta = 1.0;
  GrpoStepStats st;
  grpo_step_loss(model, &ref, tokens, r, 0, torch::zeros({2}), opts, with_kl, &st);
  EXPECT_GT(st.kl, 0);
  grpo_step_loss(model, &model, tokens, r, 0, torch::zeros({2}), opts, with_kl, &st);
  EXPECT_EQ(st.kl, 0);
  EXPECT_THROW(grpo_step_loss(model, nullptr, tokens, r, 0, torch::zeros({2}), opts, with_kl), std::invalid_argument);
}

TEST(Training, NftOptimalityMapsAdvantagesIntoTheUnitInterval) {
  auto r = nft_optimality(torch::tensor({-3.0f, -1.0f, 0.0f, 0.5f, 2.0f}));
  EXPECT_TRUE(torch::allclose(r, torch::tensor({0.0f, 0.0f, 0.5f, 0.75f, 1.0f})));
  // Positive-only: worse-than-average samples sit at 1/2 (they anchor, not repel).
  auto p = nft_optimality(torch::tensor({-3.0f, -1.0f, 0.0f, 0.5f, 2.0f}), true);
  EXPECT_TRUE(torch::allclose(p, torch::tensor({0.5f, 0.5f, 0.5f, 0.75f, 1.0f})));
  // A wider clip: r = 1/2 + A / (2M) until |A| reaches M.
  auto wide = nft_optimality(torch::tensor({-6.0f, -1.0f, 0.0f, 2.5f, 5.0f}), false, 5.0);
  EXPECT_TRUE(torch::allclose(wide, torch::tensor({0.0f, 0.4f, 0.5f, 0.75f, 1.0f})));
  EXPECT_THROW(nft_optimality(torch::zeros({2}), false, 0.0), std::invalid_argument);
}

TEST(Training, NftOptimalityStaysBalancedWhereNoAdvantageIsClipped) {
  // Skewed rewards: one good sample among poor ones. Its advantage is cut at
  // M = 1, which leaves a net push (mean 2r - 1 < 0); at M = 5 nothing is cut
  // and pull and push cancel.
  auto rewards = torch::tensor({1.0f, 0.2f, 0.2f, 0.2f, 0.1f, 0.2f, 0.3f, 0.2f});
  auto adv = group_advantages(rewards, 8, true);
  ASSERT_GT(adv.max().item<float>(), 1.0f);
  EXPECT_LT((2 * nft_optimality(adv) - 1).mean().item<double>(), -0.05);
  EXPECT_NEAR((2 * nft_optimality(adv, false, 5.0) - 1).mean().item<double>(), 0.0, 1e-6);
}

TEST(Training, NftSelectionFitsTheSelectedAndAnchorsTheRest) {
  auto r = nft_selected_optimality({true, false, false, true});
  ASSERT_EQ(r.size(0), 4);
  EXPECT_FLOAT_EQ(r[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(r[1].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(r[2].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(r[3].item<float>(), 1.0f);
  EXPECT_EQ(nft_selected_optimality({}).numel(), 0);
}

namespace {

// A policy, an identical old policy, and four rendered samples with fixed noise.
struct NftSetup {
  DiT model, old;
  torch::Tensor x0, tokens, eps;
  explicit NftSetup(uint64_t seed) : model(perturbed_model(seed)), old(perturbed_model(seed)) {
    auto prompts = some_prompts(4, seed);
    x0 = render_batch(prompts, {seed, seed + 1, seed + 2, seed + 3}, 16);
    tokens = encode_prompts(prompts, 12);
    torch::manual_seed(seed);
    eps = torch::randn(x0.sizes());
  }
};

}  // namespace

TEST(Training, NftHasNoGradientWhereEverySampleIsHalfOptimal) {
  // At v = v_old the gradient is 2b(2r - 1)(v_old - target): zero for r = 1/2.
  auto [model, old, x0, tokens, eps] = NftSetup(8);
  auto s = torch::rand({4});
  model->zero_grad();
  nft_loss(model, old, x0, tokens, torch::full({4}, 0.5f), s, eps, 1.0).backward();
  double norm2 = 0;
  for (auto& p : model->parameters())
    if (p.grad().defined()) norm2 += p.grad().pow(2).sum().item<double>();
  EXPECT_LT(norm2, 1e-12);
  EXPECT_THROW(nft_loss(model, old, x0, tokens, torch::full({4}, 0.5f), s, eps, 0.0), std::invalid_argument);
  EXPECT_THROW(nft_loss(model, old, x0, tokens, torch::full({3}, 0.5f), s, eps, 1.0), std::invalid_argument);
}

TEST(Training, NftStepsFitOptimalSamplesAndMoveAwayFromTheOthers) {
  auto [model, old, x0, tokens, eps] = NftSetup(9);
  auto s = torch::full({4}, 0.5);
  auto r = torch::tensor({1.0f, 0.0f, 1.0f, 0.0f});
  auto error = [&] {  // per-sample flow-matching error of the model
    torch::NoGradGuard ng;
    return (model->forward(interpolate(x0, eps, s), s, tokens) - (eps - x0)).pow(2).flatten(1).mean(1);
  };
  auto before = error();
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  NftLossStats st;
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    nft_loss(model, old, x0, tokens, r, s, eps, 1.0, &st).backward();
    opt.step();
  }
  EXPECT_GT(st.loss, 0);
  auto delta = error() - before;
  for (int b = 0; b < 4; ++b) {
    if (r[b].item<float>() > 0.5f) EXPECT_LT(delta[b].item<double>(), 0) << "sample " << b;
    else EXPECT_GT(delta[b].item<double>(), 0) << "sample " << b;
  }
}

TEST(Training, NftWithGuidanceFitsTheVelocityTheGuidedSamplerFollows) {
  // r = 1, b = 1: the loss is the flow-matching error of the guided velocity
  // v_null + w (v_prompt - v_null), each sample at its own noise level.
  auto [model, old, x0, tokens, eps] = NftSetup(10);
  auto s = torch::tensor({0.2f, 0.4f, 0.6f, 0.8f});
  const double w = 3.0;
  torch::Tensor expected, prompt_only;
  {
    torch::NoGradGuard ng;
    auto x = interpolate(x0, eps, s);
    auto v_prompt = model->forward(x, s, tokens), v_null = model->forward(x, s, torch::zeros_like(tokens));
    expected = (v_null + w * (v_prompt - v_null) - (eps - x0)).pow(2).mean();
    prompt_only = (v_prompt - (eps - x0)).pow(2).mean();
  }
  auto ones = torch::ones({4});
  EXPECT_NEAR(nft_loss(model, old, x0, tokens, ones, s, eps, 1.0, nullptr, w).item<double>(),
              expected.item<double>(), 1e-5 * expected.item<double>());
  EXPECT_NEAR(nft_loss(model, old, x0, tokens, ones, s, eps, 1.0).item<double>(), prompt_only.item<double>(),
              1e-5 * prompt_only.item<double>());
  // And the guided loss reaches the weights (through both branches' forward pass).
  model->zero_grad();
  nft_loss(model, old, x0, tokens, ones, s, eps, 1.0, nullptr, w).backward();
  double norm2 = 0;
  for (auto& p : model->parameters())
    if (p.grad().defined()) norm2 += p.grad().pow(2).sum().item<double>();
  EXPECT_GT(norm2, 0);
}

namespace {

// Each weight's gradient (zeros where none reached it).
std::vector<torch::Tensor> weight_grads(DiT& m) {
  std::vector<torch::Tensor> g;
  for (auto& p : m->parameters())
    g.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return g;
}

// --freeze-null's weight gradient must be the one with the null branch's
// output held constant by hand, and differ from the default's (both
// branches train) by a real amount.
void expect_prompt_branch_alone(const std::vector<torch::Tensor>& frozen,
                                const std::vector<torch::Tensor>& by_hand,
                                const std::vector<torch::Tensor>& both) {
  double diff_hand = 0, diff_both = 0, norm = 0;
  for (size_t i = 0; i < frozen.size(); ++i) {
    diff_hand += (frozen[i] - by_hand[i]).pow(2).sum().item<double>();
    diff_both += (frozen[i] - both[i]).pow(2).sum().item<double>();
    norm += by_hand[i].pow(2).sum().item<double>();
  }
  ASSERT_GT(norm, 0);
  EXPECT_LT(diff_hand, 1e-8 * norm) << "the weights' gradient is the prompt branch's alone";
  EXPECT_GT(diff_both, 1e-4 * norm)
      << "the null branch's weight gradient is a real part of the default";
}

}  // namespace

TEST(Training, NftWithAFrozenNullBranchFitsThroughThePromptBranchOnly) {
  // --freeze-null: the same loss, but its gradient is that of the guided
  // velocity with the null branch's output held constant.
  auto [model, old, x0, tokens, eps] = NftSetup(11);
  auto s = torch::tensor({0.3f, 0.5f, 0.7f, 0.9f});
  const double w = 5.0;
  auto ones = torch::ones({4});
  auto grads = [&] { return weight_grads(model); };
  model->zero_grad();
  auto x = interpolate(x0, eps, s);
  auto v_prompt = model->forward(x, s, tokens);
  torch::Tensor v_null;
  {
    torch::NoGradGuard ng;
    v_null = model->forward(x, s, torch::zeros_like(tokens));
  }
  (v_null + w * (v_prompt - v_null) - (eps - x0)).pow(2).mean().backward();
  const auto by_hand = grads();
  model->zero_grad();
  nft_loss(model, old, x0, tokens, ones, s, eps, 1.0, nullptr, w, nullptr, 0.0, /*null_grad=*/false).backward();
  const auto frozen = grads();
  model->zero_grad();
  nft_loss(model, old, x0, tokens, ones, s, eps, 1.0, nullptr, w).backward();
  const auto both = grads();
  expect_prompt_branch_alone(frozen, by_hand, both);
}

TEST(Training, NftReferenceTermAddsTheVelocitysDistanceFromTheReference) {
  auto [model, old, x0, tokens, eps] = NftSetup(11);
  auto reference = perturbed_model(12);  // another model: the distance is not zero
  auto s = torch::tensor({0.3f, 0.5f, 0.7f, 0.9f});
  auto r = torch::tensor({1.0f, 0.0f, 0.5f, 0.75f});
  const double w = 2.0, weight = 0.25;
  torch::Tensor by_hand;
  {
    torch::NoGradGuard ng;
    auto x = interpolate(x0, eps, s);
    by_hand = (guided_velocity(model, x, s, tokens, w) - guided_velocity(reference, x, s, tokens, w)).pow(2).mean();
  }
  ASSERT_GT(by_hand.item<double>(), 0);
  NftLossStats st;
  const double plain = nft_loss(model, old, x0, tokens, r, s, eps, 1.0, nullptr, w).item<double>();
  const double anchored = nft_loss(model, old, x0, tokens, r, s, eps, 1.0, &st, w, &reference, weight).item<double>();
  EXPECT_NEAR(anchored - plain, weight * by_hand.item<double>(), 1e-5 * anchored);
  EXPECT_NEAR(st.reference_mse, by_hand.item<double>(), 1e-5 * by_hand.item<double>());
  // The term pulls: a few steps on it alone bring the velocity nearer the reference.
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  for (int i = 0; i < 5; ++i) {
    opt.zero_grad();
    nft_loss(model, old, x0, tokens, torch::full({4}, 0.5f), s, eps, 1.0, &st, w, &reference, 100.0).backward();
    opt.step();
  }
  EXPECT_LT(st.reference_mse, by_hand.item<double>());
  EXPECT_THROW(nft_loss(model, old, x0, tokens, r, s, eps, 1.0, nullptr, w, nullptr, weight), std::invalid_argument);
}

namespace {

// "<count> red <shape>s", with its text.
scene::Prompt red(scene::Shape shape, int count = 1) {
  scene::Clause c;
  c.shape = shape;
  c.color = scene::Color::red;
  c.count = count;
  scene::Prompt p;
  p.tag = count == 1 ? scene::Tag::colors : scene::Tag::counting;
  p.include = {c};
  p.text = scene::prompt_text(p.tag, p.include);
  return p;
}

// A rendered prompt at 32 px, as a [1, 3, 32, 32] image.
torch::Tensor rendered(const scene::Prompt& p, uint64_t seed) {
  auto img = scene::render(p, seed, 32);
  return torch::from_blob(img.data(), {1, 3, 32, 32}, torch::kFloat32).clone();
}

// A rendered "a red <shape>".
torch::Tensor rendered_one(scene::Shape shape, uint64_t seed) {
  return rendered(red(shape), seed);
}

std::vector<scene::Detection> detect_one(const torch::Tensor& image) {
  auto img = image.detach().clamp(-1, 1).contiguous();
  return scene::detect(img.data_ptr<float>(), 32);
}

// A rendered square (seed 7) and its one blob, as the loss's target of any
// shape: the square that should be a circle of the tests below.
struct LoneSquare {
  torch::Tensor image;
  scene::Detection d;
  ShapeTarget as(scene::Shape shape) const {
    return {0, d.color, d.x0, d.y0, d.x1, d.y1, shape, false};
  }
};
LoneSquare lone_square() {
  auto image = rendered_one(scene::Shape::square, 7);
  const auto found = detect_one(image);
  if (found.size() != 1 || found[0].shape != scene::Shape::square)
    throw std::runtime_error("the rendered square is not found as one square blob");
  return {image, found[0]};
}

// The norm over the three channels of the loss's gradient at the box's
// top-left pixel: a corner the square lights and a circle leaves dark.
double corner_gradient(const LoneSquare& sq, const ShapeTarget& target, const ShapeLossOptions& o) {
  auto x = sq.image.clone().requires_grad_(true);
  shape_loss(x, {target}, o).backward();
  return x.grad().index({0, torch::indexing::Slice(), sq.d.y0, sq.d.x0}).norm().item<double>();
}

// Plain gradient steps on the pixels (no Adam to rescale a vanishing
// gradient) from `image` until `asked` scores full marks: how many, or
// kMaxSgdSteps + 1 if it never does.
constexpr int kMaxSgdSteps = 400;
int sgd_steps_to_full_marks(const scene::Prompt& asked, const torch::Tensor& image,
                            const std::vector<ShapeTarget>& targets, const ShapeLossOptions& o) {
  auto x = image.clone().requires_grad_(true);
  torch::optim::SGD opt({x}, torch::optim::SGDOptions(2.0));
  for (int step = 1; step <= kMaxSgdSteps; ++step) {
    opt.zero_grad();
    shape_loss(x, targets, o).backward();
    opt.step();
    if (score_batch({asked}, x.detach())[0].reward == 1.0) return step;
  }
  return kMaxSgdSteps + 1;
}

}  // namespace

TEST(Draft, ARenderedShapeMatchesItsOwnTemplateAndNoOther) {
  // The templates are the renderer's shapes: a rendered blob, snapped sharply,
  // is nearer its own shape's template in its box than the other two. (Not
  // at 0: the detector's majority filter shaves a triangle's apex, so its
  // box starts a row or two below the rendered one.)
  int blobs = 0;
  ShapeLossOptions sharp;
  sharp.temperature = 0.01;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    const auto shape = scene::kShapes[seed % scene::kNumShapes];
    auto image = rendered_one(shape, 100 + seed);
    const auto found = detect_one(image);
    ASSERT_EQ(found.size(), 1u) << "seed " << seed;
    const auto& d = found[0];
    std::map<scene::Shape, double> loss;
    for (const auto wanted : scene::kShapes)
      loss[wanted] = shape_loss(image, {{0, d.color, d.x0, d.y0, d.x1, d.y1, wanted, false}}, sharp).item<double>();
    EXPECT_LT(loss[shape], shape == scene::Shape::triangle ? 0.1 : 0.01) << scene::shape_name(shape) << ", seed " << seed;
    for (const auto other : scene::kShapes) {
      if (other == shape) continue;
      EXPECT_LT(loss[shape] + 0.02, loss[other])
          << scene::shape_name(shape) << " against " << scene::shape_name(other) << ", seed " << seed;
    }
    ++blobs;
  }
  EXPECT_EQ(blobs, 30);
  EXPECT_EQ(shape_template(scene::Shape::square, 3, 2).sum().item<double>(), 6.0) << "the ring stays 0";
}

TEST(Draft, TheShapeLossGradientTurnsABlobIntoTheWantedShape) {
  // Descend the loss on the pixels themselves: the gradient alone must make the
  // hard detector call each blob the wanted shape.
  const std::pair<scene::Shape, scene::Shape> cases[] = {{scene::Shape::circle, scene::Shape::square},
                                                         {scene::Shape::square, scene::Shape::circle},
                                                         {scene::Shape::circle, scene::Shape::triangle},
                                                         {scene::Shape::triangle, scene::Shape::square}};
  struct Loss {
    ShapeLossOptions::Kind kind;
    double ring, hold;
  };
  for (const auto& [kind, ring, hold] : {Loss{ShapeLossOptions::Kind::mse, 1.0, 0.0},
                                         Loss{ShapeLossOptions::Kind::bce, 1.0, 0.0},
                                         Loss{ShapeLossOptions::Kind::bce, 0.0, 0.0},
                                         Loss{ShapeLossOptions::Kind::pixel, 1.0, 0.0},
                                         Loss{ShapeLossOptions::Kind::bce, 1.0, 30.0}})
  for (const auto& [from, to] : cases) {
    SCOPED_TRACE(std::to_string(static_cast<int>(kind)) + ", ring " + std::to_string(ring) + ", hold " +
                 std::to_string(hold));
    auto image = rendered_one(from, 7).requires_grad_(true);
    auto found = detect_one(image);
    ASSERT_EQ(found.size(), 1u);
    ASSERT_EQ(found[0].shape, from);
    torch::optim::Adam opt({image}, torch::optim::AdamOptions(0.02));
    ShapeLossOptions o;
    o.kind = kind;
    o.ring_weight = ring;
    o.hold_weight = hold;
    for (int step = 0; step < 400 && !found.empty() && found[0].shape != to; ++step) {
      const auto& d = found[0];
      opt.zero_grad();
      shape_loss(image, {{0, d.color, d.x0, d.y0, d.x1, d.y1, to, false}}, o).backward();
      opt.step();
      found = detect_one(image);
    }
    ASSERT_EQ(found.size(), 1u) << scene::shape_name(from) << " -> " << scene::shape_name(to);
    EXPECT_EQ(found[0].shape, to) << scene::shape_name(from) << " -> " << scene::shape_name(to) << ": fill "
                                  << found[0].fill << ", centroid height " << found[0].centroid_height;
  }
}

TEST(Draft, BceKeepsAGradientOnPixelsSnappedToTheWrongSide) {
  // A rendered square that should be a circle: its box's corner pixels are lit
  // red (snapped firmly, m ~ 1) where the template wants 0. Under mse their
  // gradient is (m - T) m', and m' ~ 0 there; under bce it stays of order 1.
  // Both losses still rank the blob's own shape first.
  const auto sq = lone_square();
  const auto circle = sq.as(scene::Shape::circle), square = sq.as(scene::Shape::square);
  std::map<ShapeLossOptions::Kind, double> corner;
  for (const auto kind : {ShapeLossOptions::Kind::mse, ShapeLossOptions::Kind::bce}) {
    ShapeLossOptions o;
    o.kind = kind;
    corner[kind] = corner_gradient(sq, circle, o);
    const auto square_loss = shape_loss(sq.image, {square}, o).item<double>();
    EXPECT_LT(square_loss, shape_loss(sq.image, {circle}, o).item<double>());
    EXPECT_TRUE(std::isfinite(square_loss));
  }
  EXPECT_GT(corner[ShapeLossOptions::Kind::bce], 10 * corner[ShapeLossOptions::Kind::mse])
      << "mse " << corner[ShapeLossOptions::Kind::mse] << ", bce " << corner[ShapeLossOptions::Kind::bce];
}

TEST(Draft, AWiderSnapLeavesMseAGradientOnPixelsLitOnTheWrongSide) {
  // The same square that should be a circle. Under mse a corner pixel's
  // gradient is (m - T) m' with m' = m (1 - m) / t: at the default t = 0.1 a
  // firmly lit corner has m ~ 1 and hardly moves. A wider snap leaves it
  // several times the gradient (about 4x at 0.3), and still ranks the
  // blob's own shape first.
  const auto sq = lone_square();
  const auto circle = sq.as(scene::Shape::circle), square = sq.as(scene::Shape::square);
  std::map<double, double> corner;
  for (const double t : {0.1, 0.3}) {
    ShapeLossOptions o;
    o.temperature = t;
    corner[t] = corner_gradient(sq, circle, o);
    EXPECT_LT(shape_loss(sq.image, {square}, o).item<double>(),
              shape_loss(sq.image, {circle}, o).item<double>())
        << t;
  }
  EXPECT_GT(corner[0.3], 3 * corner[0.1])
      << "t = 0.1: " << corner[0.1] << ", t = 0.3: " << corner[0.3];
}

TEST(Draft, ABceWeightAddsThatMuchOfBceToMse) {
  const auto sq = lone_square();
  const auto& image = sq.image;
  const auto circle = sq.as(scene::Shape::circle);
  auto loss = [&](ShapeLossOptions::Kind kind, double bce_weight) {
    ShapeLossOptions o;
    o.kind = kind;
    o.bce_weight = bce_weight;
    return shape_loss(image, {circle}, o).item<double>();
  };
  const double mse = loss(ShapeLossOptions::Kind::mse, 0),
               bce = loss(ShapeLossOptions::Kind::bce, 0);
  EXPECT_GT(bce, mse);
  EXPECT_NEAR(loss(ShapeLossOptions::Kind::mse, 0.25), mse + 0.25 * bce, 1e-5 * bce);
  EXPECT_THROW(loss(ShapeLossOptions::Kind::bce, 0.25), std::invalid_argument)
      << "it is added to mse only";
  EXPECT_THROW(loss(ShapeLossOptions::Kind::mse, -1), std::invalid_argument);
}

namespace {

// The factor l in (0, 1] by which dimming `image` towards black, (image + 1) l
// - 1, gives the least loss for `target` (to 0.01).
double least_loss_dimming(const torch::Tensor& image, const ShapeTarget& target, const ShapeLossOptions& o) {
  double best = 1e9, best_l = 0;
  for (int k = 1; k <= 100; ++k) {
    const double l = k / 100.0;
    const double v = shape_loss((image + 1) * l - 1, {target}, o).item<double>();
    if (v < best) {
      best = v;
      best_l = l;
    }
  }
  return best_l;
}

}  // namespace

TEST(Draft, ThePixelLossAndTheHoldKeepABlobAboveTheDetectorsThreshold) {
  // A rendered square that should be a circle, dimmed towards black by a
  // factor l. Dimming lowers the wrong corners' cost and raises the right
  // pixels'. Under the pixel loss the best l leaves the blob bright enough to
  // be found; under bce it dims the blob far more (the erasure measured in
  // training runs). bce plus the hold (the pixel loss on the template's
  // inside pixels) at weight 30 leaves it found and well lit. The hold adds
  // nothing to a blob already of the wanted shape and colour, and the
  // gradient on a corner pixel that should go dark is bce's alone.
  const auto image = rendered_one(scene::Shape::square, 7);
  const auto found = detect_one(image);
  ASSERT_EQ(found.size(), 1u);
  const auto& d = found[0];
  const ShapeTarget circle{0, d.color, d.x0, d.y0, d.x1, d.y1, scene::Shape::circle, false};
  const ShapeTarget square{0, d.color, d.x0, d.y0, d.x1, d.y1, scene::Shape::square, false};
  ShapeLossOptions pixel, bce, held;
  pixel.kind = ShapeLossOptions::Kind::pixel;
  bce.kind = held.kind = ShapeLossOptions::Kind::bce;
  held.hold_weight = 30;
  const double l_pixel = least_loss_dimming(image, circle, pixel);
  const double l_bce = least_loss_dimming(image, circle, bce);
  const double l_held = least_loss_dimming(image, circle, held);
  EXPECT_EQ(detect_one((image + 1) * l_pixel - 1).size(), 1u) << "pixel: dimmed to " << l_pixel;
  EXPECT_GT(l_pixel, l_bce + 0.1) << "pixel " << l_pixel << ", bce " << l_bce;
  EXPECT_EQ(detect_one((image + 1) * l_held - 1).size(), 1u) << "held: dimmed to " << l_held;
  EXPECT_GT(l_held, std::max(0.8, l_bce + 0.15)) << "held " << l_held << ", bce " << l_bce;
  EXPECT_NEAR(shape_loss(image, {square}, held).item<double>(), shape_loss(image, {square}, bce).item<double>(), 1e-4);
  std::map<double, torch::Tensor> grad;  // by the hold's weight
  for (const auto* o : {&bce, &held}) {
    auto x = image.clone().requires_grad_(true);
    shape_loss(x, {circle}, *o).backward();
    grad[o->hold_weight] = x.grad();
  }
  const auto corner = [&](double w) { return grad[w].index({0, torch::indexing::Slice(), d.y0, d.x0}); };
  EXPECT_TRUE(torch::allclose(corner(30), corner(0))) << "the corner lies outside the circle";
  ShapeLossOptions bad;
  bad.hold_weight = -1;
  EXPECT_THROW(shape_loss(image, {circle}, bad), std::invalid_argument);
}

TEST(Draft, TheRingWeighsWhatItIsGiven) {
  // A lit pixel on the ring around a blob's box: its gradient scales with the
  // ring's weight, and is 0 at weight 0, where the box's pixels are all the
  // loss is made of.
  auto image = rendered_one(scene::Shape::square, 7);
  const auto found = detect_one(image);
  ASSERT_EQ(found.size(), 1u);
  const auto& d = found[0];
  ASSERT_GT(d.x0, 0);
  image[0][0][d.y0][d.x0 - 1] = 1.0f;  // red, just left of the box
  image[0][1][d.y0][d.x0 - 1] = -1.0f;
  image[0][2][d.y0][d.x0 - 1] = -1.0f;
  std::map<double, double> ring_grad, loss;
  for (const double w : {0.0, 1.0, 0.5}) {
    ShapeLossOptions o;
    o.ring_weight = w;
    auto x = image.clone().requires_grad_(true);
    auto l = shape_loss(x, {{0, d.color, d.x0, d.y0, d.x1, d.y1, scene::Shape::square, false}}, o);
    l.backward();
    loss[w] = l.item<double>();
    ring_grad[w] = x.grad().index({0, torch::indexing::Slice(), d.y0, d.x0 - 1}).abs().sum().item<double>();
  }
  EXPECT_EQ(ring_grad[0.0], 0.0);
  EXPECT_GT(ring_grad[0.5], 0.0);
  EXPECT_GT(ring_grad[1.0], ring_grad[0.5]);
  EXPECT_LT(loss[0.0], loss[1.0]) << "the lit ring pixel costs only where the ring counts";
  ShapeLossOptions bad;
  bad.ring_weight = -1;
  EXPECT_THROW(shape_loss(image, {{0, d.color, d.x0, d.y0, d.x1, d.y1, scene::Shape::square, false}}, bad),
               std::invalid_argument);
}

TEST(Draft, SaturatedPixelsGetAGradientOnlyStraightThroughTheClamp) {
  // A red pixel past the clamp (guided samples overshoot): its membership in
  // red has no gradient through the clamp, and one straight through it.
  auto image = torch::full({1, 3, 2, 2}, -1.0f);
  image[0][0][0][0] = 1.5f;
  for (const bool through : {false, true}) {
    auto x = image.clone().requires_grad_(true);
    soft_color_masks(x, 0.1, through)[0][static_cast<int>(scene::Color::red)][0][0].backward();
    const double g = x.grad()[0][0][0][0].item<double>();
    if (through) {
      EXPECT_GT(std::abs(g), 0.0);
    } else {
      EXPECT_EQ(g, 0.0);
    }
  }
}

TEST(Draft, ShapeTargetsWantTheShapesThatScoreBest) {
  // "a red square" drawn as a circle: its one blob should be a square.
  auto image = rendered_one(scene::Shape::circle, 7);
  const auto p = red(scene::Shape::square);
  std::vector<scene::Score> scores;
  const auto targets = shape_targets({p}, image, &scores);
  ASSERT_EQ(targets.size(), 1u);
  ASSERT_EQ(scores.size(), 1u);
  EXPECT_EQ(scores[0].reward, score_batch({p}, image)[0].reward) << "the same detection, the same score";
  EXPECT_EQ(targets[0].shape, scene::Shape::square);
  EXPECT_FALSE(targets[0].called_right);
  ShapeLossStats st;
  EXPECT_GT(shape_loss(image, targets, {}, &st).item<double>(), 0.0);
  EXPECT_EQ(st.targets, 1);
  EXPECT_EQ(st.called_right, 0);
}

TEST(Draft, AnExtraBlobGetsADarkTemplateAndItsGradientErasesIt) {
  // Two red circles rendered, "a red circle" asked: one circle is extra.
  auto image = rendered(red(scene::Shape::circle, 2), 5).requires_grad_(true);
  const auto asked = red(scene::Shape::circle);
  auto targets = shape_targets({asked}, image);
  ASSERT_EQ(targets.size(), 2u);
  ASSERT_EQ(targets[0].extra + targets[1].extra, 1);
  const auto& extra = targets[0].extra ? targets[0] : targets[1];
  EXPECT_NE(extra.shape, scene::Shape::circle) << "best_shapes parked it on a shape nobody asked for";
  // Without erasing, it is shaped into that shape; with it, its whole box and
  // ring are compared with dark.
  ShapeLossOptions erase;
  erase.erase_extras = true;
  ShapeLossStats st;
  const double dark = shape_loss(image, {extra}, erase, &st).item<double>();
  EXPECT_EQ(st.extras, 1);
  const auto m = soft_color_masks(image, erase.temperature)[0][int(scene::Color::red)]
                     .slice(0, extra.y0 - 1, extra.y1 + 1)
                     .slice(1, extra.x0 - 1, extra.x1 + 1);
  EXPECT_NEAR(dark, m.pow(2).mean().item<double>(), 1e-6);
  EXPECT_NE(dark, shape_loss(image, {extra}, {}).item<double>());
  // Descending the loss on the pixels erases the extra circle and keeps the
  // other: the detector then finds one red circle, which scores full marks.
  torch::optim::Adam opt({image}, torch::optim::AdamOptions(0.02));
  for (int step = 0; step < 400 && targets.size() > 1; ++step) {
    opt.zero_grad();
    shape_loss(image, targets, erase).backward();
    opt.step();
    targets = shape_targets({asked}, image);
  }
  const auto found = detect_one(image);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].shape, scene::Shape::circle);
  EXPECT_EQ(score_batch({asked}, image.detach())[0].reward, 1.0);
}

TEST(Draft, UnderBceAFirmlyDrawnExtraBlobKeepsItsPullToGoOut) {
  // Two red circles rendered true to the palette, "a red circle" asked: the
  // extra circle's pixels have m ~ 0.99, where mse's pull to dark, 2 m m'
  // with m' ~ (1 - m) / t, vanishes with 1 - m; under bce (extras_bce_weight)
  // it stays of order 1 / t.
  const auto image = rendered(red(scene::Shape::circle, 2), 5);
  const auto asked = red(scene::Shape::circle);
  const auto targets = shape_targets({asked}, image);
  ASSERT_EQ(targets.size(), 2u);
  const auto& extra = targets[0].extra ? targets[0] : targets[1];
  const auto& kept = targets[0].extra ? targets[1] : targets[0];
  ASSERT_TRUE(extra.extra && !kept.extra);
  ShapeLossOptions mse, bce;
  mse.erase_extras = bce.erase_extras = true;
  bce.extras_bce_weight = 1.0;
  // Its loss is bce against the dark template, -log(1 - m), over box and ring.
  const auto m = soft_color_masks(image, bce.temperature)[0][int(scene::Color::red)]
                     .slice(0, extra.y0 - 1, extra.y1 + 1)
                     .slice(1, extra.x0 - 1, extra.x1 + 1);
  EXPECT_GT(m.max().item<double>(), 0.98) << "drawn firmly";
  EXPECT_NEAR(shape_loss(image, {extra}, bce).item<double>(),
              (-(1 - m.clamp(1e-6, 1 - 1e-6)).log()).mean().item<double>(), 1e-5);
  ShapeLossOptions half = bce;
  half.extras_bce_weight = 0.5;
  EXPECT_NEAR(shape_loss(image, {extra}, half).item<double>(),
              0.5 * shape_loss(image, {extra}, bce).item<double>(), 1e-6);
  EXPECT_NEAR(shape_loss(image, {kept}, bce).item<double>(),
              shape_loss(image, {kept}, mse).item<double>(), 1e-9)
      << "the kept circle is compared under mse still";
  auto pull = [&](const ShapeLossOptions& o) {
    auto x = image.clone().requires_grad_(true);
    shape_loss(x, {extra}, o).backward();
    return x.grad().norm().item<double>();
  };
  const double pull_bce = pull(bce), pull_mse = pull(mse);
  EXPECT_GT(pull_bce, 10 * pull_mse) << "mse " << pull_mse << ", bce " << pull_bce;
  // Plain gradient steps on the pixels: bce erases the extra circle,
  // leaving one red circle (full marks), in a fraction of the steps mse needs.
  const int under_bce = sgd_steps_to_full_marks(asked, image, targets, bce),
            under_mse = sgd_steps_to_full_marks(asked, image, targets, mse);
  EXPECT_LE(under_bce, kMaxSgdSteps);
  EXPECT_GT(under_mse, 5 * under_bce) << "bce " << under_bce << " steps, mse " << under_mse;
  // It compares erased blobs' soft snap: it needs erase_extras, not the pixel loss.
  ShapeLossOptions unerased = bce, pixel = bce, negative = mse;
  unerased.erase_extras = false;
  pixel.kind = ShapeLossOptions::Kind::pixel;
  negative.extras_bce_weight = -1;
  EXPECT_THROW(shape_loss(image, targets, unerased), std::invalid_argument);
  EXPECT_THROW(shape_loss(image, targets, pixel), std::invalid_argument);
  EXPECT_THROW(shape_loss(image, targets, negative), std::invalid_argument);
}

TEST(Draft, AtObjectSizeDrawsTheShapeAtAnObjectsSizeAndPullsAWideBlobBack) {
  auto box = [](int x0, int y0, int x1, int y1) {
    return ShapeTarget{0, scene::Color::red, x0, y0, x1, y1, scene::Shape::square, false};
  };
  auto expect = [](const ShapeTarget& t, std::array<int, 4> shape_box, std::array<int, 4> compared) {
    EXPECT_EQ((std::array<int, 4>{t.tx0, t.ty0, t.tx1, t.ty1}), shape_box);
    EXPECT_EQ((std::array<int, 4>{t.x0, t.y0, t.x1, t.y1}), compared);
  };
  // A 14-px blob: a 12-px square box (max_side at 32) centred in it.
  expect(at_object_size(box(2, 3, 16, 17), 32), {3, 4, 15, 16}, {2, 3, 16, 17});
  // A 5 x 4 speck in the corner: an 8-px box (min_side), kept inside the image.
  expect(at_object_size(box(0, 0, 5, 4), 32), {0, 0, 8, 8}, {0, 0, 8, 8});
  // At the right edge, moved inside; a wide flat blob keeps its width.
  expect(at_object_size(box(28, 10, 32, 14), 32), {24, 8, 32, 16}, {24, 8, 32, 16});
  expect(at_object_size(box(0, 10, 16, 18), 32), {2, 8, 14, 20}, {0, 8, 16, 20});
  // An object's own size: the same box, and the same loss as without.
  expect(at_object_size(box(7, 9, 17, 19), 32), {7, 9, 17, 19}, {7, 9, 17, 19});
  EXPECT_THROW(at_object_size(box(30, 0, 33, 4), 32), std::invalid_argument);
  const auto sq = lone_square();
  ShapeLossOptions sized;
  sized.object_size = true;
  for (const auto wanted : scene::kShapes)
    EXPECT_NEAR(shape_loss(sq.image, {sq.as(wanted)}, sized).item<double>(),
                shape_loss(sq.image, {sq.as(wanted)}, {}).item<double>(), 1e-6);

  // A 16-px red square, wider than any object: across its own box its
  // template is itself, and nothing pulls it back.
  auto image = torch::full({1, 3, 32, 32}, -1.0f);
  image.index_put_({0, 0, torch::indexing::Slice(6, 22), torch::indexing::Slice(8, 24)}, 1.0f);
  const auto wide = detect_one(image);
  ASSERT_EQ(wide.size(), 1u);
  ASSERT_EQ(wide[0].x1 - wide[0].x0, 16);
  const ShapeTarget t{0, scene::Color::red, wide[0].x0, wide[0].y0, wide[0].x1, wide[0].y1, scene::Shape::square, true};
  auto x = image.clone().requires_grad_(true);
  shape_loss(x, {t}, {}).backward();
  EXPECT_LT(x.grad().abs().max().item<double>(), 1e-3);
  EXPECT_GT(shape_loss(image, {t}, sized).item<double>(), 0.05);
  // At an object's size, descending the loss on the pixels shrinks it to a
  // square of 12 px that the detector still finds.
  torch::optim::Adam opt({x}, torch::optim::AdamOptions(0.02));
  auto targets = shape_targets({red(scene::Shape::square)}, x);
  for (int step = 0; step < 400 && !targets.empty() && targets[0].x1 - targets[0].x0 > 12; ++step) {
    opt.zero_grad();
    shape_loss(x, targets, sized).backward();
    opt.step();
    targets = shape_targets({red(scene::Shape::square)}, x);
  }
  const auto found = detect_one(x.detach());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].shape, scene::Shape::square);
  EXPECT_LE(found[0].x1 - found[0].x0, 12);
  EXPECT_LE(found[0].y1 - found[0].y0, 12);
  EXPECT_GE(found[0].x1 - found[0].x0, 10) << "shrunk, not erased";
}

TEST(Draft, TheBackgroundTermHoldsDarkWhatLiesOutsideTheBlobsOfImagesWithTheirObjects) {
  // Row 0: "a red circle", rendered, with its one blob found; a stray red
  // pixel is then lit in a corner away from the blob's box and ring. Row 1:
  // the same image under "two red circles": one object is missing, so its
  // background is left alone.
  auto clean = rendered(red(scene::Shape::circle), 5);
  const auto prompts = std::vector<scene::Prompt>{red(scene::Shape::circle), red(scene::Shape::circle, 2)};
  auto targets = shape_targets({prompts[0]}, clean);
  ASSERT_EQ(targets.size(), 1u);
  const auto t = targets[0];
  targets.push_back(t);
  targets.back().image = 1;
  const int sy = t.y0 > 16 ? 1 : 30, sx = t.x0 > 16 ? 1 : 30;  // the stray pixel, off the box and ring
  ASSERT_TRUE(sy < t.y0 - 1 || sy > t.y1) << "the stray pixel must lie outside the box's ring";
  auto images = torch::cat({clean, clean}).clone();
  const auto rgb = scene::color_rgb(scene::Color::red);
  for (int k = 0; k < 3; ++k) images.index_put_({torch::indexing::Slice(), k, sy, sx}, rgb[size_t(k)]);
  images.requires_grad_(true);
  const double temp = ShapeLossOptions{}.temperature;
  int held = -1;
  const auto loss = background_loss(prompts, images, targets, temp, false, &held);
  EXPECT_EQ(held, 1);
  // Row 0's background: every pixel but the box and its ring, Σ_c m_c^2
  // averaged over them; the batch's two rows divide the sum.
  auto mask = torch::ones({32, 32});
  const int by0 = std::max(t.y0 - 1, 0), bx0 = std::max(t.x0 - 1, 0);
  mask.slice(0, by0, t.y1 + 1).slice(1, bx0, t.x1 + 1).fill_(0);
  const auto m = soft_color_masks(images.detach(), temp)[0].pow(2).sum(0);
  const double expected = (m * mask).sum().item<double>() / mask.sum().item<double>() / 2;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);
  EXPECT_GT(loss.item<double>(), 0.9 / mask.sum().item<double>() / 2) << "the lit stray pixel counts about 1";
  EXPECT_LT(background_loss(prompts, torch::cat({clean, clean}), targets, temp).item<double>(), 1e-3)
      << "a rendered background is dark";
  // Its gradient: on row 0's stray pixel, nowhere in the box or on row 1.
  loss.backward();
  const auto g = images.grad();
  EXPECT_GT(g[0].index({torch::indexing::Slice(), sy, sx}).abs().sum().item<double>(), 0);
  EXPECT_EQ(g[0].slice(1, by0, t.y1 + 1).slice(2, bx0, t.x1 + 1).abs().sum().item<double>(), 0);
  EXPECT_EQ(g[1].abs().sum().item<double>(), 0);
  // Descending it darkens the stray pixel and leaves the circle as it was.
  auto x = images.detach()[0].unsqueeze(0).clone().requires_grad_(true);
  torch::optim::Adam opt({x}, torch::optim::AdamOptions(0.02));
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    background_loss({prompts[0]}, x, {t}, temp).backward();
    opt.step();
  }
  EXPECT_LT(background_loss({prompts[0]}, x, {t}, temp).item<double>(), 1e-3);
  const auto found = detect_one(x);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].shape, scene::Shape::circle);
  EXPECT_TRUE(torch::equal(x.detach().slice(2, by0, t.y1 + 1).slice(3, bx0, t.x1 + 1),
                           clean.slice(2, by0, t.y1 + 1).slice(3, bx0, t.x1 + 1)));
  // No targets, no background held; a prompt per row is needed.
  EXPECT_EQ(background_loss({prompts[0]}, clean, {}, temp).item<double>(), 0);
  EXPECT_THROW(background_loss({prompts[0]}, images.detach(), targets, temp), std::invalid_argument);
}

namespace {

// `image` [1, 3, 32, 32] with colour c painted at `alpha` of its brightness
// over [x0, x1) x [y0, y1) (alpha 1: the palette's colour; under the
// detector's kMinAlpha: too dim to be found).
torch::Tensor painted(torch::Tensor image, scene::Color c, int x0, int y0, int x1, int y1, float alpha) {
  const auto rgb = scene::color_rgb(c);
  for (int k = 0; k < 3; ++k)
    image.index_put_({0, k, torch::indexing::Slice(y0, y1), torch::indexing::Slice(x0, x1)},
                     alpha * (rgb[size_t(k)] + 1) - 1);
  return image;
}

torch::Tensor dark() { return torch::full({1, 3, 32, 32}, -1.0f); }

// `image` after `steps` Adam steps on its pixels down the shape loss of
// fixed `targets` (default options).
torch::Tensor descended(const torch::Tensor& image, const std::vector<ShapeTarget>& targets,
                        int steps) {
  auto x = image.clone().requires_grad_(true);
  torch::optim::Adam opt({x}, torch::optim::AdamOptions(0.02));
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    shape_loss(x, targets).backward();
    opt.step();
  }
  return x.detach();
}

// "a red square left of a green triangle" (the triangle is clause 0, the
// square clause 1, left of it), and the same two objects asked without a
// relation.
std::pair<scene::Prompt, scene::Prompt> square_and_triangle() {
  scene::Clause triangle{scene::Shape::triangle, 1, scene::Color::green};
  scene::Clause square{scene::Shape::square, 1, scene::Color::red, scene::Relation::left_of, 0};
  return {scene::Prompt{scene::Tag::position, {triangle, square}},
          scene::Prompt{scene::Tag::color_attr, {triangle, scene::Clause{scene::Shape::square, 1, scene::Color::red}}}};
}

}  // namespace

TEST(Draft, MissingObjectsArePlacedWhereTheModelNearlyDrawsThemAndWhereTheRelationsHold) {
  const double temp = ShapeLossOptions{}.temperature;
  const int side = (scene::min_side(32) + scene::max_side(32)) / 2;
  // "a red circle" on a dark image with a faint red patch the detector does
  // not find: one missing red circle, its box over the patch.
  const auto circle = red(scene::Shape::circle);
  const auto faint = painted(dark(), scene::Color::red, 18, 4, 26, 12, 0.3f);
  ASSERT_TRUE(detect_one(faint).empty());
  const auto missing = missing_objects({circle}, faint, shape_targets({circle}, faint), temp);
  ASSERT_EQ(missing.size(), 1u);
  const auto& m = missing[0];
  EXPECT_TRUE(m.missing);
  EXPECT_EQ(m.color, scene::Color::red);
  EXPECT_EQ(m.shape, scene::Shape::circle);
  EXPECT_EQ((std::array<int, 4>{m.x1 - m.x0, m.y1 - m.y0, m.tx1 - m.tx0, m.ty1 - m.ty0}),
            (std::array<int, 4>{side, side, side, side}));
  EXPECT_TRUE(m.x0 <= 18 && m.x1 >= 26 && m.y0 <= 4 && m.y1 >= 12) << "over the patch";
  // Its weight, and the stats count it apart from the blobs.
  ShapeLossOptions twice;
  twice.missing_weight = 2;
  ShapeLossStats st;
  EXPECT_NEAR(shape_loss(faint, missing, twice, &st).item<double>(), 2 * shape_loss(faint, missing).item<double>(),
              1e-6);
  EXPECT_EQ(st.targets, 0);
  EXPECT_EQ(st.missing, 1);
  twice.missing_weight = -1;
  EXPECT_THROW(shape_loss(faint, missing, twice), std::invalid_argument);
  // Descending the loss on the pixels draws the circle: found, full marks,
  // and nothing missing any more.
  const auto drawn = descended(faint, missing, 300);
  EXPECT_EQ(score_batch({circle}, drawn)[0].reward, 1.0);
  EXPECT_TRUE(missing_objects({circle}, drawn, shape_targets({circle}, drawn), temp).empty());
  // A rendered "a red circle" misses nothing; under "two red circles" one is
  // missing, placed off the drawn circle's box and ring.
  const auto one = rendered(circle, 5);
  EXPECT_TRUE(missing_objects({circle}, one, shape_targets({circle}, one), temp).empty());
  const auto two = red(scene::Shape::circle, 2);
  const auto drawn_one = shape_targets({two}, one);
  ASSERT_EQ(drawn_one.size(), 1u);
  const auto second = missing_objects({two}, one, drawn_one, temp);
  ASSERT_EQ(second.size(), 1u);
  const auto& d = drawn_one[0];
  EXPECT_TRUE(second[0].x0 > d.x1 || second[0].x1 < d.x0 || second[0].y0 > d.y1 || second[0].y1 < d.y0);

  // "a red square left of a green triangle" (the triangle is clause 0, the
  // square clause 1, left of it): a red square drawn, no triangle; a bright
  // green patch below the square and a faint one right of it.
  const auto [left_of, both] = square_and_triangle();
  auto image = painted(dark(), scene::Color::red, 2, 11, 10, 19, 1.0f);
  image = painted(image, scene::Color::green, 2, 22, 10, 30, 0.4f);
  image = painted(image, scene::Color::green, 20, 12, 28, 20, 0.3f);
  const auto sq = shape_targets({left_of}, image);
  ASSERT_EQ(sq.size(), 1u);
  ASSERT_EQ(sq[0].shape, scene::Shape::square);
  const auto placed = missing_objects({left_of}, image, sq, temp);
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].color, scene::Color::green);
  EXPECT_EQ(placed[0].shape, scene::Shape::triangle);
  const scene::Box square_box{double(sq[0].x0), double(sq[0].y0), double(sq[0].x1), double(sq[0].y1)};
  const scene::Box tri_box{double(placed[0].x0), double(placed[0].y0), double(placed[0].x1), double(placed[0].y1)};
  EXPECT_TRUE(scene::relative_position(square_box, tri_box).contains(scene::Relation::left_of));
  EXPECT_TRUE(placed[0].x0 <= 20 && placed[0].x1 >= 28) << "over the faint patch on the right";
  // Without the relation the brighter patch below wins.
  const auto anywhere = missing_objects({both}, image, shape_targets({both}, image), temp);
  ASSERT_EQ(anywhere.size(), 1u);
  EXPECT_GE(anywhere[0].y0, sq[0].y1) << "below the square";
  EXPECT_THROW(missing_objects({left_of, both}, image, sq, temp), std::invalid_argument);
}

TEST(Draft, UnderBceAMissingObjectKeepsItsPullWhereTheModelDrawsNothing) {
  // "a red circle" on a dark image: one missing red circle. Its template's
  // lit pixels have m ~ 0, where mse's pull (m - 1) m' vanishes with m;
  // under missing_bce it stays of order 1 / t. The blobs keep mse.
  const auto circle = red(scene::Shape::circle);
  const auto image = dark();
  const auto missing =
      missing_objects({circle}, image, shape_targets({circle}, image), ShapeLossOptions{}.temperature);
  ASSERT_EQ(missing.size(), 1u);
  ShapeLossOptions mse, missing_bce, bce;
  missing_bce.missing_bce = true;
  bce.kind = ShapeLossOptions::Kind::bce;
  auto pull = [&](const ShapeLossOptions& o) {
    auto x = image.clone().requires_grad_(true);
    shape_loss(x, missing, o).backward();
    return x.grad().norm().item<double>();
  };
  const double pull_bce = pull(missing_bce), pull_mse = pull(mse);
  EXPECT_GT(pull_bce, 30 * pull_mse) << "mse " << pull_mse << ", bce " << pull_bce;
  EXPECT_NEAR(shape_loss(image, missing, missing_bce).item<double>(),
              shape_loss(image, missing, bce).item<double>(), 1e-6);
  const auto sq = lone_square();
  EXPECT_NEAR(shape_loss(sq.image, {sq.as(scene::Shape::circle)}, missing_bce).item<double>(),
              shape_loss(sq.image, {sq.as(scene::Shape::circle)}, mse).item<double>(), 1e-9)
      << "a blob is compared under mse still";
  // Plain gradient steps on the pixels, from dark: bce draws the circle
  // (full marks) in a fraction of the steps mse needs.
  const int under_bce = sgd_steps_to_full_marks(circle, image, missing, missing_bce),
            under_mse = sgd_steps_to_full_marks(circle, image, missing, mse);
  EXPECT_LE(under_bce, kMaxSgdSteps);
  EXPECT_GT(under_mse, 5 * under_bce) << "bce " << under_bce << " steps, mse " << under_mse;
  ShapeLossOptions pixel;
  pixel.kind = ShapeLossOptions::Kind::pixel;
  pixel.missing_bce = true;
  EXPECT_THROW(shape_loss(image, missing, pixel), std::invalid_argument);
}

TEST(Draft, AMisplacedBlobIsMarkedExtraAndItsObjectPlacedAgainWhereTheRelationHolds) {
  const double temp = ShapeLossOptions{}.temperature;
  // "a red square left of a green triangle" (the triangle clause 0), drawn
  // the wrong way round: the green blob in the middle, the red one right of it.
  const auto [left_of, both] = square_and_triangle();
  auto wrong = painted(dark(), scene::Color::green, 14, 11, 22, 19, 1.0f);
  wrong = painted(wrong, scene::Color::red, 24, 11, 32, 19, 1.0f);
  auto targets = shape_targets({left_of}, wrong);
  ASSERT_EQ(targets.size(), 2u);
  ASSERT_TRUE(std::none_of(targets.begin(), targets.end(), [](const ShapeTarget& t) { return t.extra; }));
  EXPECT_EQ(mark_misplaced({left_of}, targets), 1);
  const auto red_it = std::find_if(targets.begin(), targets.end(),
                                   [](const ShapeTarget& t) { return t.color == scene::Color::red; });
  const auto green_it = std::find_if(targets.begin(), targets.end(),
                                     [](const ShapeTarget& t) { return t.color == scene::Color::green; });
  ASSERT_TRUE(red_it != targets.end() && green_it != targets.end());
  const ShapeTarget red_blob = *red_it, green_blob = *green_it;
  EXPECT_TRUE(red_blob.extra && red_blob.misplaced) << "the clause that names the relation moves";
  EXPECT_FALSE(green_blob.extra || green_blob.misplaced) << "its target stays";
  // The stats count it among the extras, and apart.
  ShapeLossStats st;
  shape_loss(wrong, targets, {}, &st);
  EXPECT_EQ(st.extras, 1);
  EXPECT_EQ(st.misplaced, 1);
  // No longer standing for its clause, the red square is missing: placed left
  // of the green blob, off the old red box.
  const auto again = missing_objects({left_of}, wrong, targets, temp);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].missing);
  EXPECT_EQ(again[0].color, scene::Color::red);
  EXPECT_EQ(again[0].shape, scene::Shape::square);
  EXPECT_TRUE(scene::relative_position(box_of(again[0]), box_of(green_blob)).contains(scene::Relation::left_of));
  EXPECT_LE(again[0].x1, red_blob.x0);
  // Drawn the right way round, or asked without a relation: nothing moves.
  auto right = painted(dark(), scene::Color::green, 14, 11, 22, 19, 1.0f);
  right = painted(right, scene::Color::red, 2, 11, 10, 19, 1.0f);
  auto kept = shape_targets({left_of}, right);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(mark_misplaced({left_of}, kept), 0);
  auto unrelated = shape_targets({both}, wrong);
  EXPECT_EQ(mark_misplaced({both}, unrelated), 0);
  EXPECT_TRUE(std::none_of(unrelated.begin(), unrelated.end(), [](const ShapeTarget& t) { return t.extra; }));
  // A relation whose target is not a clause of the prompt is refused.
  auto broken = left_of;
  broken.include[1].relation_target = 5;
  auto any = shape_targets({left_of}, wrong);
  EXPECT_THROW(mark_misplaced({broken}, any), std::invalid_argument);
}

TEST(Draft, ABlobInAnotherHueIsRecolouredIntoTheMissingObjectWhereTheRelationsHold) {
  const double temp = ShapeLossOptions{}.temperature;
  // "a cyan circle" drawn as a blue square: the blob scores the circle but
  // not its colour, so it stands for no clause and the cyan circle is missing.
  scene::Prompt cyan;
  cyan.tag = scene::Tag::colors;
  cyan.include = {scene::Clause{scene::Shape::circle, 1, scene::Color::cyan}};
  cyan.text = scene::prompt_text(cyan.tag, cyan.include);
  const auto blue = painted(dark(), scene::Color::blue, 2, 2, 11, 11, 1.0f);
  auto targets = shape_targets({cyan}, blue);
  ASSERT_EQ(targets.size(), 1u);
  ASSERT_EQ(targets[0].color, scene::Color::blue);
  const ShapeTarget drawn = targets[0];
  // Without recolouring, the blob's object is placed off its box.
  const auto elsewhere = missing_objects({cyan}, blue, targets, temp);
  ASSERT_EQ(elsewhere.size(), 1u);
  EXPECT_TRUE(elsewhere[0].x0 > drawn.x1 || elsewhere[0].x1 < drawn.x0 ||
              elsewhere[0].y0 > drawn.y1 || elsewhere[0].y1 < drawn.y0);
  // Recoloured: the blob's box with the object's colour and shape, standing
  // for the clause, so nothing is missing any more.
  EXPECT_EQ(recolour_blobs({cyan}, blue, targets, temp), 1);
  const auto& t = targets[0];
  EXPECT_TRUE(t.recoloured);
  EXPECT_FALSE(t.extra || t.missing || t.called_right);
  EXPECT_EQ(t.color, scene::Color::cyan);
  EXPECT_EQ(t.shape, scene::Shape::circle);
  EXPECT_EQ((std::array<int, 4>{t.x0, t.y0, t.x1, t.y1}),
            (std::array<int, 4>{drawn.x0, drawn.y0, drawn.x1, drawn.y1}));
  EXPECT_TRUE(missing_objects({cyan}, blue, targets, temp).empty());
  EXPECT_EQ(recolour_blobs({cyan}, blue, targets, temp), 0)
      << "a recoloured blob serves its clause";
  ShapeLossStats st;
  ShapeLossOptions half;
  half.recolour_weight = 0.5;
  half.missing_weight = 3;
  const double loss = shape_loss(blue, targets, half, &st).item<double>();
  EXPECT_EQ(st.targets, 1);
  EXPECT_EQ(st.recoloured, 1);
  EXPECT_EQ(st.extras, 0);
  EXPECT_NEAR(loss, 0.5 * shape_loss(blue, targets).item<double>(), 1e-6)
      << "weighted recolour_weight";
  half.recolour_weight = -1;
  EXPECT_THROW(shape_loss(blue, targets, half), std::invalid_argument);
  // Compared under bce: on blue pixels the snap to cyan is ~1e-7, where
  // mse's pull vanishes; the same target as a plain blob's under mse barely pulls.
  auto pull = [&](const std::vector<ShapeTarget>& ts) {
    auto x = blue.clone().requires_grad_(true);
    shape_loss(x, ts).backward();
    return x.grad().norm().item<double>();
  };
  auto plain = targets;
  plain[0].recoloured = false;
  EXPECT_GT(pull(targets), 1000 * pull(plain))
      << "bce " << pull(targets) << ", mse " << pull(plain);
  // Descending it on the pixels turns the blue square into a cyan circle
  // the detector finds: full marks.
  EXPECT_EQ(score_batch({cyan}, descended(blue, targets, 300))[0].reward, 1.0);

  // "a red square left of a green triangle" (the triangle clause 0), the
  // red square drawn and a blue blob: recoloured into the triangle only where
  // the square is left of it.
  const auto [left_of, both] = square_and_triangle();
  auto right = painted(dark(), scene::Color::red, 2, 11, 10, 19, 1.0f);
  right = painted(right, scene::Color::blue, 18, 11, 26, 19, 1.0f);
  auto there = shape_targets({left_of}, right);
  ASSERT_EQ(there.size(), 2u);
  EXPECT_EQ(recolour_blobs({left_of}, right, there, temp), 1);
  const auto made =
      std::find_if(there.begin(), there.end(), [](const ShapeTarget& u) { return u.recoloured; });
  ASSERT_TRUE(made != there.end());
  EXPECT_EQ(made->color, scene::Color::green);
  EXPECT_EQ(made->shape, scene::Shape::triangle);
  EXPECT_GE(made->x0, 18);
  const auto square = std::find_if(there.begin(), there.end(), [](const ShapeTarget& u) {
    return u.color == scene::Color::red && u.shape == scene::Shape::square;
  });
  ASSERT_TRUE(square != there.end()) << "the blob standing for its clause is left as it is";
  EXPECT_FALSE(square->recoloured);
  auto wrong = painted(dark(), scene::Color::red, 10, 11, 18, 19, 1.0f);
  wrong = painted(wrong, scene::Color::blue, 0, 11, 8, 19, 1.0f);
  auto not_there = shape_targets({left_of}, wrong);
  ASSERT_EQ(not_there.size(), 2u);
  EXPECT_EQ(recolour_blobs({left_of}, wrong, not_there, temp), 0)
      << "the square is not left of the blue blob";
  EXPECT_EQ(missing_objects({left_of}, wrong, not_there, temp).size(), 1u)
      << "the triangle is placed instead";
  // A misplaced blob is not recoloured: it is to be drawn again elsewhere.
  auto marked = shape_targets({left_of}, right);
  for (auto& u : marked) u.misplaced = u.color == scene::Color::blue;
  EXPECT_EQ(recolour_blobs({left_of}, right, marked, temp), 0);
  EXPECT_THROW(recolour_blobs({left_of, both}, right, there, temp), std::invalid_argument);
}

TEST(Draft, TheGradTailRollsOutWhatTheSamplerDoesAndReachesTheWeights) {
  auto m = perturbed_model(5);
  const auto prompts = some_prompts(3);
  auto tokens = encode_prompts(prompts, 12);
  const std::vector<uint64_t> seeds = {11, 12, 13};
  SamplerOptions ode;
  ode.steps = 6;
  ode.noise_level = 0;
  ode.guidance = 3;
  const auto reference = sample(m, tokens, seeds, ode).images;
  for (int k : {1, 3}) {
    m->zero_grad();
    auto images = sample_with_grad_tail(m, tokens, seeds, ode.steps, ode.shift, ode.guidance, k);
    EXPECT_TRUE(torch::allclose(images, reference, 1e-5, 1e-5)) << "K = " << k;
    images.pow(2).sum().backward();
    double grad = 0;
    for (const auto& p : m->parameters())
      if (p.grad().defined()) grad += p.grad().abs().sum().item<double>();
    EXPECT_GT(grad, 0.0) << "K = " << k;
  }
  EXPECT_THROW(sample_with_grad_tail(m, tokens, seeds, 6, 3.0, 1.0, 7), std::invalid_argument);
  // The early latent the anchor needs is the sampler's, before that step.
  ode.record = true;
  const auto recorded = sample(m, tokens, seeds, ode).latents;
  EarlyLatent early{2, {}};
  sample_with_grad_tail(m, tokens, seeds, ode.steps, ode.shift, ode.guidance, 3, &early);
  EXPECT_TRUE(torch::allclose(early.x, recorded[2], 1e-6, 1e-6));
  EXPECT_EQ(early.sigma, shifted_sigmas(ode.steps, ode.shift)[2]);
  early.step = 3;  // the first step with the graph
  EXPECT_THROW(sample_with_grad_tail(m, tokens, seeds, ode.steps, ode.shift, ode.guidance, 3, &early),
               std::invalid_argument);
}

TEST(Draft, AFrozenNullBranchMovesNoWeightsButKeepsItsPathToTheLatent) {
  // --freeze-null under draft: inside the grad tail the latent carries a
  // graph; the null branch must pass its gradient on to the latent (the
  // earlier steps' share) while its weights take none.
  auto m = perturbed_model(6);
  auto tokens = encode_prompts(some_prompts(3), 12);
  const double w = 4.0;
  const auto x_value = torch::randn({3, 3, 16, 16});
  const auto c = torch::randn({3, 3, 16, 16});  // a fixed linear loss on the velocity
  auto run = [&](bool null_grad, bool null_by_hand) {
    m->zero_grad();
    auto x = x_value.clone().requires_grad_(true);
    torch::Tensor v;
    if (null_by_hand) {  // the null branch as a constant
      torch::Tensor v_null;
      {
        torch::NoGradGuard ng;
        v_null = m->forward(x, torch::full({3}, 0.6), torch::zeros_like(tokens));
      }
      v = v_null + w * (m->forward(x, torch::full({3}, 0.6), tokens) - v_null);
    } else {
      v = guided_velocity(m, x, 0.6, tokens, w, nullptr, null_grad);
    }
    (v * c).sum().backward();
    return std::make_pair(weight_grads(m), x.grad().clone());
  };
  const auto [both, x_both] = run(true, false);
  const auto [frozen, x_frozen] = run(false, false);
  const auto [by_hand, x_by_hand] = run(false, true);
  expect_prompt_branch_alone(frozen, by_hand, both);
  EXPECT_TRUE(torch::allclose(x_frozen, x_both, 1e-5, 1e-6))
      << "the latent keeps its path through the null branch";
  EXPECT_FALSE(torch::allclose(x_frozen, x_by_hand, 1e-3, 1e-4))
      << "and that path carries gradient";
  for (const auto& p : m->parameters())
    EXPECT_TRUE(p.requires_grad()) << "the weights are trainable again";

  // The tail with a frozen null branch rolls out the same images and still reaches the weights.
  const std::vector<uint64_t> seeds = {21, 22, 23};
  torch::Tensor plain;
  {
    torch::NoGradGuard ng;
    plain = sample_with_grad_tail(m, tokens, seeds, 6, 3.0, w, 3);
  }
  m->zero_grad();
  auto images = sample_with_grad_tail(m, tokens, seeds, 6, 3.0, w, 3, nullptr, /*null_grad=*/false);
  EXPECT_TRUE(torch::allclose(images, plain, 1e-5, 1e-5));
  images.pow(2).sum().backward();
  double grad = 0;
  for (const auto& p : m->parameters())
    if (p.grad().defined()) grad += p.grad().abs().sum().item<double>();
  EXPECT_GT(grad, 0.0);
  EXPECT_TRUE(DraftOptions{}.null_grad)
      << "both branches train unless --freeze-null asks otherwise";
}

namespace {

// The sampler's options for draft_step's rollout, recording its latents.
SamplerOptions recorded_ode(const DraftOptions& opts) {
  SamplerOptions ode;
  ode.steps = opts.steps;
  ode.shift = opts.shift;
  ode.noise_level = 0;
  ode.guidance = opts.guidance;
  ode.record = true;
  return ode;
}

}  // namespace

// DRaFT on the shipped model: 12 ODE steps (fewer and its images hold no
// blobs yet), the gradient through the last 2.
DraftOptions short_draft(double guidance) {
  DraftOptions opts;
  opts.steps = 12;
  opts.grad_steps = 2;
  opts.guidance = guidance;
  return opts;
}

TEST(Draft, TheReferenceAnchorHoldsTheEarlyStepsNearTheStartingWeights) {
  // The shipped model draws blobs, so the shape loss has something to pull
  // on; the same three steps with and without the anchor, from the same start.
  const std::string path = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  auto shipped = load_checkpoint(path);
  auto reference = shipped.model;
  const auto prompts = some_prompts(4, 21);
  auto tokens = encode_prompts(prompts, reference->config().text_len);
  auto opts = short_draft(shipped.info.guidance);
  const auto sigmas = shifted_sigmas(opts.steps, opts.shift);
  // Mean |v - v_ref|^2 over the steps without the graph, on the reference's own trajectory.
  const auto latents = sample(reference, tokens, {5, 6, 7, 8}, recorded_ode(opts)).latents;
  auto early_distance = [&](DiT& m) {
    torch::NoGradGuard ng;
    double sum = 0;
    for (int i = 0; i < opts.steps - opts.grad_steps; ++i)
      sum += (guided_velocity(m, latents[size_t(i)], sigmas[size_t(i)], tokens, opts.guidance) -
              guided_velocity(reference, latents[size_t(i)], sigmas[size_t(i)], tokens, opts.guidance))
                 .pow(2)
                 .mean()
                 .item<double>();
    return sum / (opts.steps - opts.grad_steps);
  };
  std::map<double, double> distance;
  for (double w : {0.0, 1e4}) {
    auto m = load_checkpoint(path).model;
    torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(3e-4));
    opts.reference_weight = w;
    for (int it = 0; it < 3; ++it) {
      const std::vector<uint64_t> seeds = {uint64_t(100 + it), uint64_t(200 + it), uint64_t(300 + it), uint64_t(400 + it)};
      const auto st = draft_step(m, adam, prompts, tokens, seeds, opts, &reference);
      ASSERT_GT(st.loss.targets, 0) << "no blobs: the shape loss pulls on nothing";
      if (w > 0) {
        EXPECT_GE(st.anchored_step, 0);
        EXPECT_LT(st.anchored_step, opts.steps - opts.grad_steps);
        if (it == 0) {
          EXPECT_LT(st.reference_mse, 1e-12) << "the first step starts at the reference";
        } else {
          EXPECT_GT(st.reference_mse, 0.0);
        }
      } else {
        EXPECT_EQ(st.anchored_step, -1);
      }
    }
    distance[w] = early_distance(m);
  }
  EXPECT_GT(distance[0.0], 0.0);
  EXPECT_LT(distance[1e4], 0.5 * distance[0.0]) << "the anchor should hold the early steps: " << distance[1e4]
                                                 << " against " << distance[0.0] << " without it";
}

TEST(Draft, TheEarlyPredictionIsTheShapeLossOfTheCleanImagePredictedAtAnEarlyStep) {
  const std::string path = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  auto shipped = load_checkpoint(path);
  const auto prompts = some_prompts(4, 21);
  auto tokens = encode_prompts(prompts, shipped.model->config().text_len);
  auto opts = short_draft(shipped.info.guidance);
  const std::vector<uint64_t> seeds = {5, 6, 7, 8};
  // By hand, on the sampler's trajectory with the starting weights: the
  // final image's targets, compared with x_s - sigma_s v(x_s).
  const auto roll = sample(shipped.model, tokens, seeds, recorded_ode(opts));
  const auto targets = shape_targets(prompts, roll.images);
  ASSERT_FALSE(targets.empty()) << "no blobs: the shape loss pulls on nothing";
  const auto sigmas = shifted_sigmas(opts.steps, opts.shift);
  // One Adam step from the same start, without and with the early prediction.
  std::map<double, torch::Tensor> moved;
  for (double w : {0.0, 1.0}) {
    auto m = load_checkpoint(path).model;
    const auto before = torch::nn::utils::parameters_to_vector(m->parameters()).detach().clone();
    torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(1e-3));
    opts.early_weight = w;
    const auto stats = draft_step(m, adam, prompts, tokens, seeds, opts);
    if (w == 0) {
      EXPECT_EQ(stats.anchored_step, -1);
      EXPECT_EQ(stats.early_loss, 0.0);
    } else {
      ASSERT_GE(stats.anchored_step, 0);
      ASSERT_LT(stats.anchored_step, opts.steps - opts.grad_steps);
      const int s = stats.anchored_step;
      auto fresh = load_checkpoint(path).model;
      torch::NoGradGuard ng;
      const auto x = roll.latents[size_t(s)];
      const auto x0 = x - sigmas[size_t(s)] * guided_velocity(fresh, x, sigmas[size_t(s)], tokens, opts.guidance);
      EXPECT_NEAR(stats.early_loss, shape_loss(x0, targets, opts.loss).item<double>(), 1e-4);
      EXPECT_GT(stats.early_loss, 0.0);
    }
    moved[w] = torch::nn::utils::parameters_to_vector(m->parameters()).detach() - before;
  }
  EXPECT_FALSE(torch::allclose(moved[0.0], moved[1.0])) << "the early prediction's gradient reaches the weights";
  opts.early_weight = -1;
  auto m = load_checkpoint(path).model;
  torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(1e-3));
  EXPECT_THROW(draft_step(m, adam, prompts, tokens, seeds, opts), std::invalid_argument);
  // Relocating misplaced blobs needs both the missing objects and erasing.
  opts.early_weight = 0;
  opts.relocate_misplaced = true;
  opts.add_missing = true;
  opts.loss.erase_extras = false;
  EXPECT_THROW(draft_step(m, adam, prompts, tokens, seeds, opts), std::invalid_argument);
}

TEST(Draft, ShapeWeightsWeighEachTargetByItsPromptsTagAndWantedShape) {
  // shape_loss: a target's weight multiplies its term, and must be finite and 0 or more.
  auto image = rendered_one(scene::Shape::square, 7);
  const auto found = detect_one(image);
  ASSERT_EQ(found.size(), 1u);
  const auto& d = found[0];
  ShapeTarget circle{0, d.color, d.x0, d.y0, d.x1, d.y1, scene::Shape::circle, false};
  const double one = shape_loss(image, {circle}).item<double>();
  ASSERT_GT(one, 0.0) << "a square compared with a circle's template costs";
  circle.weight = 2.5;
  EXPECT_NEAR(shape_loss(image, {circle}).item<double>(), 2.5 * one, 1e-6);
  for (const double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    circle.weight = bad;
    EXPECT_THROW(shape_loss(image, {circle}), std::invalid_argument) << bad;
  }
  // draft_step: each target not extra takes shape_weights[its tag][its wanted
  // shape]; the stats carry the rollout's shape calls, which the weights of
  // the next iteration follow (tools/train/shape_focus.h).
  const std::string path = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  auto shipped = load_checkpoint(path);
  const auto prompts = some_prompts(6, 23);
  auto tokens = encode_prompts(prompts, shipped.model->config().text_len);
  auto opts = short_draft(shipped.info.guidance);
  opts.loss.erase_extras = true;
  opts.add_missing = true;
  scene::PerTagShape<double> table;
  for (size_t tag = 0; tag < table.size(); ++tag)
    for (size_t s = 0; s < table[tag].size(); ++s)
      table[tag][s] = 0.5 + 0.25 * double(tag) + 0.1 * double(s);
  opts.shape_weights = table;
  const std::vector<uint64_t> seeds = {5, 6, 7, 8, 9, 10};
  // By hand, on the sampler's rollout with the starting weights.
  const auto roll = sample(shipped.model, tokens, seeds, recorded_ode(opts));
  scene::ShapeConfusion calls;
  auto targets = shape_targets(prompts, roll.images, nullptr, &calls);
  const auto missing = missing_objects(prompts, roll.images, targets, opts.loss.temperature);
  targets.insert(targets.end(), missing.begin(), missing.end());
  ASSERT_FALSE(targets.empty());
  const double unweighted = shape_loss(roll.images, targets, opts.loss).item<double>();
  for (auto& t : targets)
    if (!t.extra) t.weight = table[size_t(prompts[size_t(t.image)].tag)][size_t(t.shape)];
  const double weighted = shape_loss(roll.images, targets, opts.loss).item<double>();
  EXPECT_GT(std::abs(weighted - unweighted), 1e-4) << "the weights change the loss";
  auto m = load_checkpoint(path).model;
  torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(1e-3));
  const auto st = draft_step(m, adam, prompts, tokens, seeds, opts);
  EXPECT_NEAR(st.loss.loss, weighted, 1e-4);
  EXPECT_EQ(st.calls.calls, calls.calls);
  int blobs = 0;
  for (const auto tag : scene::kTags)
    for (const auto w : scene::kShapes)
      for (const auto c : scene::kShapes)
        blobs += st.calls.calls[size_t(tag)][size_t(w)][size_t(c)];
  EXPECT_GT(blobs, 0) << "the rollout's shape calls are counted";
}

TEST(Draft, ReferenceTargetsAreTheReferencesBlobsAndTheLogKeepsTheOwn) {
  // The loss compares the trained rollout with the blobs the reference draws
  // on the same (prompt, seed), so a blob the trained model drops still
  // costs; the stats count the trained images' own blobs.
  const std::string path = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  auto shipped = load_checkpoint(path);
  auto reference = shipped.model;
  auto trained = load_checkpoint(path).model;
  {
    // Another model on the same scenes: its blobs differ from the reference's.
    torch::NoGradGuard ng;
    torch::manual_seed(7);
    for (auto& p : trained->parameters()) p.add_(torch::randn_like(p) * 0.05 * (p.abs().mean() + 1e-3));
  }
  const auto prompts = some_prompts(4, 21);
  auto tokens = encode_prompts(prompts, reference->config().text_len);
  const std::vector<uint64_t> seeds = {5, 6, 7, 8};
  auto opts = short_draft(shipped.info.guidance);
  opts.loss.kind = ShapeLossOptions::Kind::bce;
  opts.targets = DraftOptions::Targets::reference;
  torch::Tensor own_images, ref_images;
  {
    torch::NoGradGuard ng;
    own_images = sample_with_grad_tail(trained, tokens, seeds, opts.steps, opts.shift, opts.guidance, 1);
    ref_images = sample_with_grad_tail(reference, tokens, seeds, opts.steps, opts.shift, opts.guidance, 1);
  }
  const auto own = shape_targets(prompts, own_images);
  const auto theirs = shape_targets(prompts, ref_images);
  ASSERT_GT(theirs.size(), 0u) << "the reference draws no blobs: nothing to compare";
  const double expected = shape_loss(own_images, theirs, opts.loss).item<double>();
  ASSERT_NE(expected, shape_loss(own_images, own, opts.loss).item<double>()) << "the two target sets agree";
  torch::optim::SGD sgd(trained->parameters(), torch::optim::SGDOptions(0.0));  // the loss is read before the step
  const auto st = draft_step(trained, sgd, prompts, tokens, seeds, opts, &reference);
  EXPECT_NEAR(st.loss.loss, expected, 1e-4 * std::abs(expected));
  EXPECT_EQ(st.loss.targets, int(own.size()));
  int own_right = 0;
  for (const auto& t : own) own_right += t.called_right;
  EXPECT_EQ(st.loss.called_right, own_right);
  EXPECT_GT(st.grad_norm, 0.0);
  EXPECT_THROW(draft_step(trained, sgd, prompts, tokens, seeds, opts), std::invalid_argument);
  // own_and_lost: the own blobs, and the reference's that none of them covers.
  opts.targets = DraftOptions::Targets::own_and_lost;
  auto both = own;
  const auto lost = lost_blobs(own, theirs);
  both.insert(both.end(), lost.begin(), lost.end());
  const double expected_both = shape_loss(own_images, both, opts.loss).item<double>();
  const auto st_both = draft_step(trained, sgd, prompts, tokens, seeds, opts, &reference);
  EXPECT_NEAR(st_both.loss.loss, expected_both, 1e-4 * std::abs(expected_both));
  EXPECT_EQ(st_both.loss.targets, int(own.size()));
  EXPECT_THROW(draft_step(trained, sgd, prompts, tokens, seeds, opts), std::invalid_argument);
}

TEST(Draft, ThePretrainingMixAddsItsWeightTimesTheFlowMatchingLossOnRenderedScenes) {
  const std::string path = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  auto shipped = load_checkpoint(path);
  auto model = shipped.model;
  const auto& cfg = model->config();
  // The batch: rendered scenes (as render_batch draws them), a share of them
  // with the null prompt, and the same batch again from the same generators.
  auto make = [&](double drop) {
    scene::PromptGenerator prompts(4);
    uint64_t image_seed = 50;
    auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
    auto b = make_ptx_batch(cfg, prompts, image_seed, 32, drop, gen);
    EXPECT_EQ(image_seed, 82u) << "one image seed per scene";
    return b;
  };
  const auto b = make(0.5);
  ASSERT_EQ(b.x0.sizes(), (std::vector<int64_t>{32, 3, cfg.image_size, cfg.image_size}));
  EXPECT_TRUE(torch::equal(b.x0, make(0.5).x0));
  EXPECT_TRUE(torch::equal(b.tokens, make(0.5).tokens));
  const auto null_rows = b.tokens.abs().sum(1).eq(0).sum().item<int64_t>();
  EXPECT_GT(null_rows, 0);
  EXPECT_LT(null_rows, 32);
  EXPECT_EQ(make(0.0).tokens.abs().sum(1).eq(0).sum().item<int64_t>(), 0) << "no dropout, no null prompts";
  {
    scene::PromptGenerator prompts(4);
    std::vector<scene::Prompt> ps;
    std::vector<uint64_t> seeds;
    for (int i = 0; i < 32; ++i) ps.push_back(prompts.next()), seeds.push_back(uint64_t(50 + i));
    EXPECT_TRUE(torch::equal(b.x0, render_batch(ps, seeds, int(cfg.image_size))));
  }
  // The loss is spotlight-pretrain's flow-matching loss on that batch.
  double before = 0;
  {
    torch::NoGradGuard ng;
    before = ptx_loss(model, b).item<double>();
    const auto by_hand =
        flow_matching_loss(model->forward(interpolate(b.x0, b.eps, b.sigmas), b.sigmas, b.tokens), b.x0, b.eps);
    EXPECT_DOUBLE_EQ(before, by_hand.item<double>());
  }
  // draft_step adds it with its weight: the log reads it before the step, and
  // with the mix dominating, the step lowers it.
  const auto prompts = some_prompts(4, 21);
  auto tokens = encode_prompts(prompts, cfg.text_len);
  const std::vector<uint64_t> seeds = {5, 6, 7, 8};
  auto opts = short_draft(shipped.info.guidance);
  opts.ptx_weight = 1e4;
  torch::optim::SGD frozen(model->parameters(), torch::optim::SGDOptions(0.0));
  EXPECT_THROW(draft_step(model, frozen, prompts, tokens, seeds, opts), std::invalid_argument)
      << "the mix needs its batch";
  // Plain gradient descent, a short step along the clipped gradient (Adam's
  // first step moves every weight by its learning rate, too far to lower any loss).
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(1e-2));
  const auto st = draft_step(model, sgd, prompts, tokens, seeds, opts, nullptr, &b);
  EXPECT_NEAR(st.ptx_loss, before, 1e-5 * before);
  torch::NoGradGuard ng;
  EXPECT_LT(ptx_loss(model, b).item<double>(), before);
  scene::PromptGenerator any_prompts(1);
  uint64_t any_seed = 0;
  EXPECT_THROW(make_ptx_batch(cfg, any_prompts, any_seed, 4, 1.0, at::make_generator<at::CPUGeneratorImpl>(1)),
               std::invalid_argument)
      << "a dropout of 1 leaves no prompt";
}

TEST(Draft, LostBlobsAreTheReferencesThatNoOwnBlobOfTheirColourOverlaps) {
  using scene::Color;
  auto blob = [](int64_t image, Color c, int x0, int y0, int x1, int y1) {
    ShapeTarget t;
    t.image = image;
    t.color = c;
    t.x0 = x0, t.y0 = y0, t.x1 = x1, t.y1 = y1;
    return t;
  };
  const std::vector<ShapeTarget> own = {blob(0, Color::red, 4, 4, 10, 10),
                                        blob(1, Color::blue, 0, 0, 6, 6)};
  const std::vector<ShapeTarget> reference = {
      blob(0, Color::red, 8, 8, 14, 14),   // overlaps the own red one: drawn
      blob(0, Color::red, 10, 4, 16, 10),  // touches it edge to edge only: lost
      blob(0, Color::blue, 4, 4, 10, 10),  // the red one's box, another colour: lost
      blob(1, Color::blue, 5, 5, 9, 9),    // overlaps the own blue one by a pixel: drawn
      blob(2, Color::blue, 0, 0, 6, 6),    // an image with no own blobs: lost
  };
  const auto lost = lost_blobs(own, reference);
  ASSERT_EQ(lost.size(), 3u);
  EXPECT_EQ(lost[0].x0, 10);
  EXPECT_EQ(lost[1].color, Color::blue);
  EXPECT_EQ(lost[1].image, 0);
  EXPECT_EQ(lost[2].image, 2);
  EXPECT_TRUE(lost_blobs(own, {}).empty());
  EXPECT_EQ(lost_blobs({}, reference).size(), reference.size());
}

class CheckpointRoundTrip : public ::testing::TestWithParam<int64_t> {};

INSTANTIATE_TEST_SUITE_P(Checkpoint, CheckpointRoundTrip, ::testing::Values(0, 8),
                         [](const auto& info) { return "PixelHead" + std::to_string(info.param); });

TEST_P(CheckpointRoundTrip, ReproducesTheModelBitForBit) {
  auto model = perturbed_model(8, GetParam());
  const auto path = temp_path("spotlight-ck.pt");
  save_checkpoint(path, model, {"grpo", 42, 0.5, 3.5});
  auto loaded = load_checkpoint(path);
  EXPECT_EQ(loaded.info.kind, "grpo");
  EXPECT_DOUBLE_EQ(loaded.info.guidance, 3.5);
  EXPECT_EQ(loaded.info.step, 42);
  EXPECT_DOUBLE_EQ(loaded.info.reward, 0.5);
  EXPECT_EQ(loaded.model->config().dim, 32);
  EXPECT_EQ(loaded.model->config().pixel_head, GetParam());
  auto tokens = encode_prompts(some_prompts(2), 12);
  auto x = torch::randn({2, 3, 16, 16});
  EXPECT_TRUE(torch::equal(model->forward(x, torch::full({2}, 0.3), tokens),
                           loaded.model->forward(x, torch::full({2}, 0.3), tokens)));
  std::filesystem::remove(path);
}

TEST(DiT, AGrownLowNoiseExpertStartsAsTheBaseAndThenTakesOnlyTheLowNoiseLevels) {
  auto base = perturbed_model(6);
  auto grown = grow_low_noise_expert(base, 0.5);
  EXPECT_EQ(grown->config().expert_boundary, 0.5);
  ASSERT_TRUE(grown->low_noise_expert());
  EXPECT_EQ(grown->parameter_count(), 2 * base->parameter_count());
  torch::NoGradGuard ng;
  auto x = torch::randn({4, 3, 16, 16});
  auto tokens = encode_prompts(some_prompts(4), 12);
  const auto mixed = torch::tensor({0.9, 0.3, 0.5, 0.1});  // two on each side; 0.5 is the base's
  EXPECT_TRUE(torch::equal(base->forward(x, mixed, tokens), grown->forward(x, mixed, tokens)))
      << "a model that gains an expert must draw as before";
  // Trained (here: moved), the expert changes the velocity below the boundary only.
  for (auto& p : grown->low_noise_expert()->parameters()) p.add_(0.05 * torch::randn_like(p));
  const auto v_base = base->forward(x, mixed, tokens), v = grown->forward(x, mixed, tokens);
  for (int64_t i : {0, 2})
    EXPECT_TRUE(torch::equal(v[i], v_base[i])) << "sample " << i << " is above the boundary";
  for (int64_t i : {1, 3})
    EXPECT_FALSE(torch::equal(v[i], v_base[i])) << "sample " << i << " is below it";
  // A sample's velocity does not depend on the levels of the batch it sits in.
  for (int64_t i = 0; i < 4; ++i) {
    auto one = grown->forward(x.narrow(0, i, 1), mixed.narrow(0, i, 1), tokens.narrow(0, i, 1));
    EXPECT_TRUE(torch::equal(one[0], v[i])) << "sample " << i;
  }
  // The expert travels in the checkpoint; a second one cannot be grown.
  const auto path = temp_path("spotlight-expert.pt");
  save_checkpoint(path, grown, {});
  auto back = load_checkpoint(path).model;
  std::filesystem::remove(path);
  EXPECT_EQ(back->config().expert_boundary, 0.5);
  EXPECT_TRUE(torch::equal(back->forward(x, mixed, tokens), v));
  EXPECT_THROW(grow_low_noise_expert(back, 0.3), CheckpointError);
  EXPECT_THROW(grow_low_noise_expert(base, 1.0), CheckpointError);
  auto bad = test_config();
  bad.expert_boundary = -0.1;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
}

TEST(Checkpoint, MissingOrCorruptFilesGiveAClearError) {
  EXPECT_THROW(load_checkpoint("/nonexistent/ck.pt"), CheckpointError);
  const auto path = temp_path("spotlight-bad.pt");
  std::ofstream(path) << "not a checkpoint";
  try {
    load_checkpoint(path);
    FAIL() << "a corrupt file loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("not a Spotlight checkpoint"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

TEST(Checkpoint, TheShippedTinyCheckpointLoadsAndSamples) {
  const std::string path = std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt";
  auto ck = load_checkpoint(path);
  EXPECT_EQ(ck.model->config().name, "tiny");
  EXPECT_EQ(ck.info.kind, "pretrain");
  EXPECT_GT(ck.info.reward, 0.0) << "the shipped checkpoint records its evaluation reward";
  SamplerOptions opts;
  opts.steps = 4;
  auto prompts = some_prompts(2);
  auto images = sample(ck.model, encode_prompts(prompts, 12), {1, 2}, opts).images;
  EXPECT_EQ(images.sizes(), torch::IntArrayRef({2, 3, 32, 32}));
  EXPECT_TRUE(torch::isfinite(images).all().item<bool>());
}
