import StallWatch
print("stallwatch: not built yet")
