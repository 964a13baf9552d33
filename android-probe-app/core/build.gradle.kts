// Pure Java: the wire codec, the typed Bundle model and the request
// dispatcher, tested on the JVM against vectors/wire (also runnable without
// Gradle: core/run-tests.sh).
plugins {
    `java-library`
}

java {
    sourceCompatibility = JavaVersion.VERSION_17
    targetCompatibility = JavaVersion.VERSION_17
}

dependencies {
    testImplementation(platform("org.junit:junit-bom:5.10.2"))
    testImplementation("org.junit.jupiter:junit-jupiter")
    testRuntimeOnly("org.junit.platform:junit-platform-launcher")
}

tasks.test {
    useJUnitPlatform()
    systemProperty("cetp.vectors.dir", rootProject.projectDir.resolve("../vectors/wire").canonicalPath)
}
