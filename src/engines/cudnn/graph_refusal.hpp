// How a Graph API refusal reads in a layer's decisions. cuDNN's refusal (a cudnn-frontend error as
// CB_CHECK_CUDNN_FRONTEND throws it) runs to kilobytes: the call, where and on which rank, then one block
// per engine configuration it tried, each a stack of "Warning: STATUS; Reason: ..." lines. The decisions
// of a cell keep one line per refused graph: the call and cuDNN's message, and each engine's first (most
// specific) reason. Plain text: tested on the CPU.
#pragma once

#include <string>

namespace crossbench::cudnn {

// At most this many characters, for a refusal of any length.
inline constexpr std::size_t kRefusalSummaryLimit = 400;

// "cuDNN Graph API call `g.create_execution_plans(...)` failed: No valid engine configs for __ [engine 3:
// mathPrec != CUDNN_DATA_FLOAT; engine 1: !isTypeSupported]" from the whole text; the text itself where it
// is one line without a location (an error of ours).
[[nodiscard]] std::string graph_refusal_summary(const std::string& refusal);

}  // namespace crossbench::cudnn
