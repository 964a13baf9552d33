plugins {
    id("com.android.application")
}

android {
    namespace = "com.clawseed.probe"
    compileSdk = 34

    defaultConfig {
        applicationId = "com.clawseed.probe"
        minSdk = 26
        targetSdk = 34
        versionCode = 1
        versionName = "0.1.0"
    }

    signingConfigs {
        // Identity b must differ from a in its certificate too (cross-caller
        // cases compare cert_sha256), and identity a's must not change from
        // one build or machine to the next (a Provider's policy may list it,
        // as the sample's manager_certs does): both are signed with committed
        // keystores, test keys whose passwords are public, never to be used
        // for anything released. scripts/build-apks.sh signs with the same.
        create("probeA") {
            storeFile = file("probe-a-test.keystore")
            storeType = "pkcs12"
            storePassword = "cetp-probe-a"
            keyAlias = "probe-a"
            keyPassword = "cetp-probe-a"
        }
        create("probeB") {
            storeFile = file("probe-b-test.keystore")
            storeType = "pkcs12"
            storePassword = "cetp-probe-b"
            keyAlias = "probe-b"
            keyPassword = "cetp-probe-b"
        }
    }

    // Two identities for cross-caller tests: each flavor is its own app
    // (own UID, package and certificate) listening on its own abstract socket.
    flavorDimensions += "identity"
    productFlavors {
        create("a") {
            dimension = "identity"
            buildConfigField("String", "SOCKET_NAME", "\"cetp-probe\"")
            buildConfigField("String", "IDENTITY_NAME", "\"a\"")
            // The other probe's hostile authority, named by this one's
            // HostileToolService$Foreign (a service whose ContentProvider
            // is in another package). jvm/gen-sources.py reads this line.
            manifestPlaceholders["peerHostedAuthority"] = "com.clawseed.probe.b.hostile.clawseed.tools"
            signingConfig = signingConfigs.getByName("probeA")
        }
        create("b") {
            dimension = "identity"
            applicationIdSuffix = ".b"
            buildConfigField("String", "SOCKET_NAME", "\"cetp-probe-b\"")
            buildConfigField("String", "IDENTITY_NAME", "\"b\"")
            manifestPlaceholders["peerHostedAuthority"] = "com.clawseed.probe.hostile.clawseed.tools"
            signingConfig = signingConfigs.getByName("probeB")
        }
    }

    buildTypes {
        getByName("debug") {
            // A build type's signing config wins over a flavor's, and debug
            // has the debug key by default: clear it here so that each
            // flavor's own config applies.
            signingConfig = null
        }
    }

    buildFeatures {
        buildConfig = true
    }

    compileOptions {
        sourceCompatibility = JavaVersion.VERSION_17
        targetCompatibility = JavaVersion.VERSION_17
    }

    testOptions {
        // Robolectric reads the merged manifest and resources.
        unitTests.isIncludeAndroidResources = true
        unitTests.all {
            // ManifestInstaller reads app/src/main/AndroidManifest.xml from the repository.
            it.systemProperty("cetp.repo.dir", rootProject.projectDir.resolve("..").canonicalPath)
        }
    }

    lint {
        // QUERY_ALL_PACKAGES is intended: a test probe must see every Provider.
        disable += "QueryAllPackagesPermission"
    }
}

dependencies {
    implementation(project(":core"))
    // The versions of android-probe-app/jvm/pom.xml, which
    // scripts/probe-app-check.sh uses where there is no Android SDK.
    testImplementation("org.robolectric:robolectric:4.14.1")
    testImplementation("junit:junit:4.13.2")
}
