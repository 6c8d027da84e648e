import StallWatch
print("stallwatch-demo: not built yet")
