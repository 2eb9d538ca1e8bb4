// Host-time floor of one kernel launch on this machine's driver, for comparison with our runtime's warm
// launch (gpu-harness "host" phase). Times cuLaunchKernel (driver API, as our runtime calls it) and the
// runtime API's <<<>>> for a trivial CUDA C++ kernel: median over 10k launches, host clock around the call,
// a device sync every 512 launches so the launch queue never blocks.
// Build and run on the GPU machine: nvcc -O2 -arch=sm_90 launch_floor.cu -lcuda -o /tmp/lf && /tmp/lf
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

__global__ void noop(float* p, int n) {
    if (threadIdx.x == 0 && n < 0) p[0] = 1.0f;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
static double time_launches(F launch) {
    std::vector<double> t;
    for (int i = 0; i < 1000; i++) launch();
    cudaDeviceSynchronize();
    for (int i = 0; i < 10000; i++) {
        auto a = std::chrono::steady_clock::now();
        launch();
        auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
        if (i % 512 == 511) cudaDeviceSynchronize();
    }
    cudaDeviceSynchronize();
    return median(t);
}

int main() {
    float* d = nullptr;
    if (cudaMalloc(&d, 4) != cudaSuccess) { printf("cudaMalloc failed\n"); return 1; }
    cudaFunction_t rf;
    if (cudaGetFuncBySymbol(&rf, (const void*)noop) != cudaSuccess) { printf("no func\n"); return 1; }
    CUfunction f = (CUfunction)rf;
    int n = 1;
    void* args[] = {&d, &n};
    CUstream s = 0;
    double drv = time_launches([&] { cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr); });
    double drv128 = time_launches([&] { cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, s, args, nullptr); });
    double rt = time_launches([&] { noop<<<1, 128>>>(d, n); });
    printf("launch floor (trivial CUDA C++ kernel, median of 10k): cuLaunchKernel block(1,1,1) %.2f us, "
           "block(128) %.2f us, <<<1,128>>> %.2f us\n", drv, drv128, rt);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
