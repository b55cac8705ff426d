// Softmax cross-entropy: cudnnSoftmaxForward (log-softmax, accurate) on the
// fp32 logits, then a small kernel for the negative log-likelihood of each
// image's label and, in training, the gradient (softmax - onehot) / N written
// straight into the logits' gradient in the data type. The mean over the
// batch is taken on the host by check() (it is never needed in a timed step).
#include "crossbench/error.hpp"
#include "engines/cudnn/graph.hpp"
#include "engines/cudnn/kernels_elementwise.hpp"

namespace crossbench::cudnn {
namespace {

class Loss final : public LayerImpl {
 public:
  Tensor logits, logp, labels, row_loss, dlogits;
  TensorDesc ld, pd;
  void setup(SetupContext&) override {
    ld = describe_tensor(logits);
    pd = describe_tensor(logp);
  }
};

}  // namespace

void build_loss(Builder& b, int index) {
  const int from = b.input_of(index);
  auto* loss = b.make_impl<Loss>(index);
  loss->logits = b.state(from).out;
  if (loss->logits.type != DType::f32 || !loss->logits.is_packed())
    throw Error("the loss needs packed fp32 logits; got " + shape_text(loss->logits));
  b.pool.make_persistent(loss->logits.buffer);  // check() reads them after the step
  b.logits = loss->logits;
  loss->logp = b.new_tensor(loss->logits.dims, DType::f32, b.label(index, "log-probabilities"));
  loss->labels = Tensor{{b.batch, 1, 1, 1}, {1, 1, 1, 1}, DType::f32, false, b.labels_buffer, 0};
  loss->row_loss = Tensor{{b.batch, 1, 1, 1}, {1, 1, 1, 1}, DType::f32, false, b.row_loss_buffer, 0};
  b.push(index, Stage::loss, b.label(index, "log-softmax"), {loss->logits, loss->logp}, [loss](const Exec& e) {
    CB_CHECK_CUDNN(cudnnSoftmaxForward(e.dnn, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, loss->ld,
                                       e.ptr(loss->logits), &kZero, loss->pd, e.ptr(loss->logp)));
  });
  const bool gradient = b.training && b.state(from).needs_grad;
  if (gradient) loss->dlogits = b.gradient_sink(from).target;
  b.push(index, Stage::loss, b.label(index, "negative log-likelihood"),
         {loss->logp, loss->labels, loss->row_loss, loss->dlogits}, [loss, gradient](const Exec& e) {
           const std::int64_t rows = loss->logits.n(), classes = loss->logits.c();
           kernels::nll(e.ptr_as<const float>(loss->logp), e.ptr_as<const std::int32_t>(loss->labels),
                        e.ptr_as<float>(loss->row_loss), gradient ? e.ptr(loss->dlogits) : nullptr,
                        loss->dlogits.type, rows, classes, e.stream);
         });
}

}  // namespace crossbench::cudnn
