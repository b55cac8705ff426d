// RAII owners of every CUDA, cuDNN and cuBLAS object a session creates, so
// that a session that throws part-way (OutOfMemory in prepare, say) releases
// all it held and the next cell starts as in a fresh process.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <utility>

#include "core/cuda/cudnn_check.hpp"

namespace crossbench::cudnn {

// A move-only owner of a handle `T` released by `Destroy` (errors on release
// are ignored: a destructor must not throw, and a poisoned context is
// reported by the next checked call anyway).
template <typename T, auto Destroy>
class Owner {
 public:
  Owner() = default;
  explicit Owner(T handle) : handle_(handle) {}
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  Owner(Owner&& other) noexcept : handle_(std::exchange(other.handle_, T{})) {}
  Owner& operator=(Owner&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, T{});
    }
    return *this;
  }
  ~Owner() { reset(); }
  void reset() {
    if (handle_) (void)Destroy(handle_);
    handle_ = T{};
  }
  T get() const { return handle_; }
  operator T() const { return handle_; }  // NOLINT: pass straight to the C APIs
  explicit operator bool() const { return handle_ != T{}; }

 private:
  T handle_{};
};

using CudnnHandle = Owner<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owner<cublasHandle_t, cublasDestroy>;
using Stream = Owner<cudaStream_t, cudaStreamDestroy>;
using Event = Owner<cudaEvent_t, cudaEventDestroy>;
using Graph = Owner<cudaGraph_t, cudaGraphDestroy>;
using GraphExec = Owner<cudaGraphExec_t, cudaGraphExecDestroy>;
using TensorDesc = Owner<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owner<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = Owner<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Owner<cudnnPoolingDescriptor_t, cudnnDestroyPoolingDescriptor>;
using LrnDesc = Owner<cudnnLRNDescriptor_t, cudnnDestroyLRNDescriptor>;
using ActivationDesc = Owner<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;
using OpTensorDesc = Owner<cudnnOpTensorDescriptor_t, cudnnDestroyOpTensorDescriptor>;

// One stream capture (RAII): begun on construction; finish() ends it and
// returns the graph. Left unfinished (the enqueueing threw), the destructor
// ends the capture, destroys the partial graph and clears the error, so the
// stream is usable again. Relaxed: cuDNN and cuBLAS may query the device
// during capture; nothing else in this process captures on the stream.
class StreamCapture {
 public:
  explicit StreamCapture(cudaStream_t stream) : stream_(stream) {
    CB_CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  }
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;
  ~StreamCapture() {
    if (stream_ == nullptr) return;
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream_, &partial);
    if (partial != nullptr) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
  }
  Graph finish() {
    cudaGraph_t captured = nullptr;
    CB_CHECK_CUDA(cudaStreamEndCapture(std::exchange(stream_, nullptr), &captured));
    return Graph(captured);
  }

 private:
  cudaStream_t stream_;
};

inline GraphExec instantiate(const Graph& graph) {
  cudaGraphExec_t exec = nullptr;
  CB_CHECK_CUDA(compat::graph_instantiate(&exec, graph));  // CUDA 11.8 has the older signature
  return GraphExec(exec);
}

inline CudnnHandle make_cudnn_handle() {
  cudnnHandle_t h = nullptr;
  CB_CHECK_CUDNN(cudnnCreate(&h));
  return CudnnHandle(h);
}
inline CublasHandle make_cublas_handle() {
  cublasHandle_t h = nullptr;
  CB_CHECK_CUBLAS(cublasCreate(&h));
  return CublasHandle(h);
}
inline Stream make_stream() {
  cudaStream_t s = nullptr;
  CB_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s);
}
inline Event make_event() {
  cudaEvent_t e = nullptr;
  CB_CHECK_CUDA(cudaEventCreate(&e));
  return Event(e);
}
inline TensorDesc make_tensor_desc() {
  cudnnTensorDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreateTensorDescriptor(&d));
  return TensorDesc(d);
}
inline FilterDesc make_filter_desc() {
  cudnnFilterDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreateFilterDescriptor(&d));
  return FilterDesc(d);
}
inline ConvDesc make_conv_desc() {
  cudnnConvolutionDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreateConvolutionDescriptor(&d));
  return ConvDesc(d);
}
inline PoolDesc make_pool_desc() {
  cudnnPoolingDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreatePoolingDescriptor(&d));
  return PoolDesc(d);
}
inline LrnDesc make_lrn_desc() {
  cudnnLRNDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreateLRNDescriptor(&d));
  return LrnDesc(d);
}
inline ActivationDesc make_relu_desc() {
  cudnnActivationDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreateActivationDescriptor(&d));
  ActivationDesc owner(d);
  CB_CHECK_CUDNN(cudnnSetActivationDescriptor(d, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return owner;
}

inline OpTensorDesc make_add_desc() {
  cudnnOpTensorDescriptor_t d = nullptr;
  CB_CHECK_CUDNN(cudnnCreateOpTensorDescriptor(&d));
  OpTensorDesc owner(d);
  CB_CHECK_CUDNN(cudnnSetOpTensorDescriptor(d, CUDNN_OP_TENSOR_ADD, CUDNN_DATA_FLOAT, CUDNN_NOT_PROPAGATE_NAN));
  return owner;
}

// Device memory from one cudaMalloc, freed on destruction. A failed
// allocation throws OutOfMemory and clears the (non-sticky) error so the
// next cell starts clean.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(std::size_t bytes, const char* what);
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }
  void reset() {
    if (data_ != nullptr) (void)cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  char* data() const { return static_cast<char*>(data_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace crossbench::cudnn
