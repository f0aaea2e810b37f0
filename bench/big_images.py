import time, statistics, numpy as np
from gpuscope import ndimage
def wall(fn, n=7):
    fn(); ts=[]
    for _ in range(n):
        t=time.perf_counter(); fn(); ts.append(time.perf_counter()-t)
    return statistics.median(ts)*1e3
r=np.random.default_rng(0)
big=r.random((8192,8192),dtype=np.float32)
stack=big.reshape(16,2048,2048)
e=r.random((4362,4148),dtype=np.float32)
print("8192² 2-D median 3x3: %.1f ms" % wall(lambda: ndimage.median_filter(big, size=3)))
print("16x2048² stack median (1,3,3), same bytes: %.1f ms" % wall(lambda: ndimage.median_filter(stack, size=(1,3,3))))
print("8192² gaussian sigma 2: %.1f ms" % wall(lambda: ndimage.gaussian_filter(big, 2)))
print("16x2048² gaussian (0,2,2): %.1f ms" % wall(lambda: ndimage.gaussian_filter(stack, (0,2,2))))
print("Eiger-sized 4362x4148 f32 median 3x3: %.1f ms" % wall(lambda: ndimage.median_filter(e, size=3)))
