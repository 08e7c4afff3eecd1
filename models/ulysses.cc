#include "models/ulysses.h"

#include "models/dit.h"

namespace spotlight::models {
namespace {

// One all-to-all of a [d, ...] float tensor: block s goes to rank s; the
// result's block s came from rank s.
torch::Tensor exchange(const torch::Tensor& blocks, collective::Communicator& comm) {
  auto send = blocks.to(torch::kFloat32).contiguous();
  auto recv = torch::empty_like(send);
  comm.all_to_all(send.data_ptr(), recv.data_ptr(), size_t(send.numel() / send.size(0)) * sizeof(float));
  return recv;
}

void check_divides(int64_t n, int d, const char* what) {
  TORCH_CHECK(n % d == 0, "sequence parallel: ", what, " (", n, ") must divide by the degree ", d);
}

}  // namespace

torch::Tensor seq_to_heads(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  const auto B = t.size(0), H = t.size(1), n = t.size(2), dh = t.size(3);
  check_divides(H, d, "heads");
  // [B, H, n, dh] -> [d (head group = destination), B, H/d, n, dh]
  auto recv = exchange(t.view({B, d, H / d, n, dh}).permute({1, 0, 2, 3, 4}), comm);
  // [d (source = token block), B, H/d, n, dh] -> [B, H/d, d*n, dh]
  return recv.permute({1, 2, 0, 3, 4}).reshape({B, H / d, d * n, dh});
}

torch::Tensor heads_to_seq(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  const auto B = t.size(0), h = t.size(1), N = t.size(2), dh = t.size(3);
  check_divides(N, d, "tokens");
  // [B, h, N, dh] -> [d (token block = destination), B, h, N/d, dh]
  auto recv = exchange(t.reshape({B, h, d, N / d, dh}).permute({2, 0, 1, 3, 4}), comm);
  // [d (source = head group), B, h, n, dh] -> [B, d*h, n, dh]
  return recv.permute({1, 0, 2, 3, 4}).reshape({B, d * h, N / d, dh});
}

torch::Tensor gather_heads(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  auto mine = t.to(torch::kFloat32).contiguous();
  std::vector<int64_t> shape{d};
  shape.insert(shape.end(), mine.sizes().begin(), mine.sizes().end());
  auto all = torch::empty(shape, mine.options());
  comm.all_gather(mine.data_ptr(), all.data_ptr(), size_t(mine.numel()) * sizeof(float));
  // [d, B, h, L, dh] -> [B, d*h, L, dh]
  return all.permute({1, 0, 2, 3, 4}).reshape({t.size(0), d * t.size(1), t.size(2), t.size(3)});
}

torch::Tensor gather_tokens(const torch::Tensor& t, collective::Communicator& comm) {
  const int d = comm.size();
  auto mine = t.to(torch::kFloat32).contiguous();
  auto all = torch::empty({d, mine.size(0), mine.size(1), mine.size(2)}, mine.options());
  comm.all_gather(mine.data_ptr(), all.data_ptr(), size_t(mine.numel()) * sizeof(float));
  return all.permute({1, 0, 2, 3}).reshape({t.size(0), d * t.size(1), t.size(2)});
}

std::pair<torch::Tensor, torch::Tensor> ulysses_joint_attention(
    const torch::Tensor& qc, const torch::Tensor& kc, const torch::Tensor& vc, const torch::Tensor& qx,
    const torch::Tensor& kx, const torch::Tensor& vx, const torch::Tensor& key_mask, collective::Communicator& comm) {
  const int d = comm.size(), r = comm.rank();
  const auto H = qc.size(1), L = qc.size(2);
  const auto B = qx.size(0), n = qx.size(2), dh = qx.size(3);
  check_divides(H, d, "heads");
  const auto h = H / d;
  // Two exchanges per attention instead of five: a collective costs a round
  // of messages among d processes, far more than its few kilobytes.
  // 1. q, k and v of my tokens go out together: [3, B, H, n, dh] ->
  //    [d (head group = destination), 3, B, h, n, dh].
  auto in = exchange(torch::stack({qx, kx, vx}).view({3, B, d, h, n, dh}).permute({2, 0, 1, 3, 4, 5}), comm);
  //    [d (source = token block), 3, B, h, n, dh] -> [3, B, h, d*n, dh]
  auto qkv = in.permute({1, 2, 3, 0, 4, 5}).reshape({3, B, h, d * n, dh});
  auto mine = [&](const torch::Tensor& t) { return t.narrow(1, r * h, h); };  // this rank's heads of the text
  auto q = torch::cat({mine(qc), qkv[0]}, 2);
  auto k = torch::cat({mine(kc), qkv[1]}, 2);
  auto v = torch::cat({mine(vc), qkv[2]}, 2);
  auto out = attention(q, k, v, key_mask);  // [B, h, L + d*n, dh]
  // 2. Back in one exchange: rank s gets its token block of my heads' image
  //    output, and the text output of my heads (the same to every rank).
  auto out_x = out.narrow(2, L, d * n).reshape({B, h, d, n, dh}).permute({2, 0, 1, 3, 4});  // [d, B, h, n, dh]
  auto out_c = out.narrow(2, 0, L).unsqueeze(0).expand({d, B, h, L, dh});
  auto back = exchange(torch::cat({out_x, out_c}, 3), comm);  // [d (source = head group), B, h, n + L, dh]
  auto image = back.narrow(3, 0, n).permute({1, 0, 2, 3, 4}).reshape({B, H, n, dh});
  auto text = back.narrow(3, n, L).permute({1, 0, 2, 3, 4}).reshape({B, H, L, dh});
  return {text, image};
}

}  // namespace spotlight::models
