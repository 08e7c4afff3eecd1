// Ulysses sequence parallelism through the Communicator (Gloo over TCP, one
// thread per rank): the exchanges are exact permutations, the split joint
// attention equals the whole one, and the shipped DiT's forward at SP degree
// 2 and 4 equals its single-rank forward.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <thread>
#include <vector>

#include "models/checkpoint.h"
#include "models/dit.h"
#include "models/ulysses.h"
#include "spotlight/collective.h"

using namespace spotlight;

namespace {

// Runs body(comm) on `d` ranks, one thread each, and returns their results.
std::vector<torch::Tensor> on_ranks(int d, const std::string& group,
                                    const std::function<torch::Tensor(collective::Communicator&)>& body) {
  auto kv = collective::make_memory_kv();
  std::vector<torch::Tensor> out(d);
  std::vector<std::string> errors(d);
  std::vector<std::thread> ts;
  for (int r = 0; r < d; ++r)
    ts.emplace_back([&, r] {
      try {
        torch::NoGradGuard no_grad;  // thread-local
        auto comm = collective::make_gloo_communicator(*kv, group, 1, r, d);
        out[r] = body(*comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (int r = 0; r < d; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  return out;
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

}  // namespace

TEST(Ulysses, ExchangesArePermutationsThatUndoEachOther) {
  for (int d : {2, 4}) {
    auto full = torch::randn({2, 4, 8 * d, 3});  // [B, H, N, dh]
    auto res = on_ranks(d, "perm", [&](collective::Communicator& c) {
      const auto n = full.size(2) / d;
      auto mine = full.narrow(2, c.rank() * n, n);
      auto by_heads = models::seq_to_heads(mine, c);
      // All tokens, this rank's heads.
      const auto h = full.size(1) / d;
      EXPECT_TRUE(torch::equal(by_heads, full.narrow(1, c.rank() * h, h)));
      EXPECT_TRUE(torch::equal(models::heads_to_seq(by_heads, c), mine));
      EXPECT_TRUE(torch::equal(models::gather_heads(by_heads.narrow(2, 0, 5), c), full.narrow(2, 0, 5)));
      return torch::Tensor();
    });
  }
}

TEST(Ulysses, SplitJointAttentionEqualsTheWholeAttention) {
  const int64_t B = 2, H = 4, L = 5, N = 16, dh = 8;
  auto qc = torch::randn({B, H, L, dh}), kc = torch::randn({B, H, L, dh}), vc = torch::randn({B, H, L, dh});
  auto qx = torch::randn({B, H, N, dh}), kx = torch::randn({B, H, N, dh}), vx = torch::randn({B, H, N, dh});
  auto mask = torch::zeros({B, 1, 1, L + N});
  mask.index_put_({1, 0, 0, 4}, -INFINITY);  // a padded text token
  auto whole = models::attention(torch::cat({qc, qx}, 2), torch::cat({kc, kx}, 2), torch::cat({vc, vx}, 2), mask);
  for (int d : {2, 4}) {
    auto outs = on_ranks(d, "attn", [&](collective::Communicator& c) {
      const auto n = N / d;
      auto [oc, ox] = models::ulysses_joint_attention(qc, kc, vc, qx.narrow(2, c.rank() * n, n),
                                                      kx.narrow(2, c.rank() * n, n), vx.narrow(2, c.rank() * n, n),
                                                      mask, c);
      EXPECT_LT(max_diff(oc, whole.narrow(2, 0, L)), 1e-5) << "text output, rank " << c.rank();
      return ox;
    });
    EXPECT_LT(max_diff(torch::cat(outs, 2), whole.narrow(2, L, N)), 1e-5) << "d=" << d;
  }
}

TEST(Ulysses, DiTForwardAtDegreeTwoAndFourEqualsTheSingleRankForward) {
  auto ck = models::load_checkpoint(std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt");
  auto model = ck.model;
  const auto& cfg = model->config();
  torch::NoGradGuard no_grad;
  auto x = torch::randn({3, cfg.channels, cfg.image_size, cfg.image_size});
  auto s = torch::tensor({0.9f, 0.5f, 0.1f});
  auto tokens = torch::randint(2, 20, {3, cfg.text_len}, torch::kInt64);
  tokens.index_put_({0, torch::indexing::Slice(6, torch::indexing::None)}, 0);  // padding
  auto single = model->forward(x, s, tokens);
  for (int d : {2, 4}) {
    auto outs = on_ranks(d, "dit", [&](collective::Communicator& c) {
      models::SequenceParallel sp{&c};
      return model->forward(x, s, tokens, &sp);
    });
    for (int r = 0; r < d; ++r) EXPECT_LT(max_diff(outs[r], single), 1e-4) << "d=" << d << " rank " << r;
  }
}

TEST(Ulysses, APixelHeadSeesTheWholeImageOnEveryRank) {
  // The head's convolutions cross the patch borders, so its features travel
  // with the patches through the gather and every rank refines the whole image.
  auto ck =
      models::load_checkpoint(std::string(SPOTLIGHT_SOURCE_DIR) + "/models/checkpoints/tiny.pt");
  auto cfg = ck.model->config();
  if (cfg.pixel_head == 0) cfg.pixel_head = 16;
  models::DiT model(cfg);
  models::copy_matching_weights(ck.model, model);
  torch::NoGradGuard no_grad;
  for (auto& p : model->named_parameters())
    if (p.key().rfind("pixel_out", 0) == 0) p.value().add_(torch::randn_like(p.value()) * 0.05);
  auto x = torch::randn({2, cfg.channels, cfg.image_size, cfg.image_size});
  auto s = torch::tensor({0.8f, 0.2f});
  auto tokens = torch::randint(2, 20, {2, cfg.text_len}, torch::kInt64);
  auto single = model->forward(x, s, tokens);
  auto outs = on_ranks(2, "pixel", [&](collective::Communicator& c) {
    models::SequenceParallel sp{&c};
    return model->forward(x, s, tokens, &sp);
  });
  for (int r = 0; r < 2; ++r) EXPECT_LT(max_diff(outs[r], single), 1e-4) << "rank " << r;
}

TEST(Ulysses, ADegreeThatDoesNotDivideTheHeadsIsRefused) {
  auto model = models::DiT(models::dit_config("tiny"));
  const auto& cfg = model->config();
  auto x = torch::randn({1, cfg.channels, cfg.image_size, cfg.image_size});
  auto tokens = torch::randint(2, 20, {1, cfg.text_len}, torch::kInt64);
  std::vector<std::string> errors(3);
  auto kv = collective::make_memory_kv();
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r)
    ts.emplace_back([&, r] {
      torch::NoGradGuard no_grad;
      auto c = collective::make_gloo_communicator(*kv, "three", 1, r, 3);
      models::SequenceParallel sp{c.get()};
      try {
        model->forward(x, torch::tensor({0.5f}), tokens, &sp);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  for (const auto& e : errors) EXPECT_NE(e.find("must divide"), std::string::npos) << e;
}
