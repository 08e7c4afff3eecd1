// spotlight-train --lr-scale: the rules that give each parameter, by name,
// its learning-rate factor, and the refusal of malformed ones.
#include "tools/train/lr_scales.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace spotlight::tools {
namespace {

TEST(LrScales, TheFirstMatchingPrefixGivesTheFactorAndOthersGetOne) {
  const std::vector<LrScaleRule> rules{parse_lr_scale("text.=20"), parse_lr_scale("blocks.0.=0.5"),
                                       parse_lr_scale("blocks.=0")};
  EXPECT_EQ(lr_scale_for("text.embed.weight", rules), 20);
  EXPECT_EQ(lr_scale_for("text_pool.weight", rules), 1);  // "text." names the encoder alone
  EXPECT_EQ(lr_scale_for("blocks.0.qkv_x.weight", rules), 0.5);
  EXPECT_EQ(lr_scale_for("blocks.3.qkv_x.weight", rules), 0);
  EXPECT_EQ(lr_scale_for("final_out.bias", rules), 1);
  EXPECT_EQ(lr_scale_for("final_out.bias", {}), 1);
}

TEST(LrScales, AStarMatchesEveryNameSoThatEarlierRulesTakeTheirsAndTheRestFreeze) {
  const std::vector<LrScaleRule> rules{parse_lr_scale("text.=1"), parse_lr_scale("*=0")};
  EXPECT_EQ(lr_scale_for("text.pos", rules), 1);
  EXPECT_EQ(lr_scale_for("patch_embed.weight", rules), 0);
  EXPECT_EQ(lr_scale_for("low_noise.text.pos", rules), 0);
}

TEST(LrScales, ParametersAreGroupedByFactorInTheOrderFactorsFirstAppearAndZeroFreezes) {
  const std::vector<LrScaleRule> rules{parse_lr_scale("text.=20"), parse_lr_scale("blocks.=0")};
  const auto g = group_by_lr_scale({"pos", "text.a", "blocks.0.w", "text.b", "final.w", "blocks.1.w"}, rules);
  EXPECT_EQ(g.scales, (std::vector<double>{1, 20}));
  EXPECT_EQ(g.members, (std::vector<std::vector<size_t>>{{0, 4}, {1, 3}}));
  EXPECT_EQ(g.frozen, (std::vector<size_t>{2, 5}));
  EXPECT_TRUE(group_by_lr_scale({"a"}, {parse_lr_scale("*=0")}).scales.empty());
}

TEST(LrScales, MalformedRulesAreRefusedWithTheirText) {
  for (const char* bad : {"text", "=2", "text.=", "text.=abc", "text.=-1", "text.=nan", "text.=inf", "text.=2x"}) {
    try {
      parse_lr_scale(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  const auto r = parse_lr_scale("a=b=3");  // the last '=' splits: prefixes may hold '='
  EXPECT_EQ(r.prefix, "a=b");
  EXPECT_EQ(r.scale, 3);
}

}  // namespace
}  // namespace spotlight::tools
